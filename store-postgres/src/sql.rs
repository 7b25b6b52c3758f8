//! Every statement the store runs, loaded from `sql/` with the schema put in once per
//! store.
//!
//! Each statement is a file, `sql/<field>.sql`, read with `include_str!`: plain SQL
//! you can paste into `psql` after replacing `{schema}` with a schema name and the
//! fragments with their files (`{item_cols}` with `sql/item_cols.sql`, `{stall_set}`
//! with `sql/stall_set.sql`, `{max_stream_run}` with
//! [`tenure_core::MAX_STREAM_RUN`]). sqlx's PostgreSQL driver has no named
//! parameters, so each file opens with a comment that says what the statement does,
//! which transition of `tenure_core::machine` it encodes, and what each of `$1 .. $n`
//! holds; a test checks that the comment lists exactly the parameters the statement
//! uses. The statement sent to the server is the file without its comment lines, on
//! one line.
//!
//! Times are bound parameters read from the store's clock; no statement calls `now()`.
//! No statement depends on session state (no `SET`, no session advisory locks, no
//! temporary tables), so all of them work through a transaction-pooling proxy.
//! `schema.sql` beside `sql/` shows the tables, indexes and functions they run on.

use crate::store::inspect::OpSql;

/// The name of the partial unique index that makes G10 a schema invariant.
pub(crate) const SCOPE_INDEX: &str = "items_scope_running";

/// The fragment `{item_cols}`: the columns of an item, as every read and `RETURNING`
/// lists them (alias `i`).
const ITEM_COLS: &str = include_str!("../sql/item_cols.sql");

/// The fragment `{stall_set}`: the effect of `machine::stall`, as SET clauses.
const STALL_SET: &str = include_str!("../sql/stall_set.sql");

/// The statement of a file as it is sent for `schema` (already validated): the comment
/// lines dropped, the lines joined, the fragments and the schema put in.
pub(crate) fn load(file: &str, schema: &str) -> String {
    body(file)
        .replace("{item_cols}", &body(ITEM_COLS))
        .replace("{stall_set}", &body(STALL_SET))
        .replace("{max_stream_run}", &tenure_core::MAX_STREAM_RUN.to_string())
        .replace("{schema}", schema)
}

/// A file's SQL without its comment lines, on one line.
fn body(file: &str) -> String {
    file.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Declares [`Sql`] with one field per statement file, in the order given.
macro_rules! statements {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The statements of one store: each field is `sql/<field>.sql`.
        #[derive(Debug)]
        pub(crate) struct Sql {
            $($(#[$doc])* pub(crate) $name: String,)*
            /// The operator's inspection and control.
            pub(crate) op: OpSql,
        }

        impl Sql {
            /// The statements for `schema` (already validated).
            pub(crate) fn new(schema: &str) -> Sql {
                Sql {
                    $($name: load(
                        include_str!(concat!("../sql/", stringify!($name), ".sql")),
                        schema,
                    ),)*
                    op: OpSql::new(schema),
                }
            }
        }
    };
}

statements! {
    enqueue,
    enqueue_notify,
    dedup_claim_keys,
    dedup_existing,
    stream_reserve,
    claim,
    claim_locked,
    claim_partitioned,
    claim_locked_partitioned,
    recover,
    renew,
    /// `renew` keeping reported progress (migration 16).
    renew_progress,
    complete,
    /// Of a complete's tokens, those still current (running at that attempt) though
    /// not completed: refused as out of stream order (G9).
    still_current,
    promote,
    fail,
    release,
    purge_done,
    purge_dedup,
    purge_streams,
    requeue,
    discard,
    item_get,
    queue_counts,
    heartbeat,
    instance_list,
    evict,
    deregister,
    leader_acquire,
    leader_read,
    leader_live,
    leader_resign,
    claim_run_tails,
    put_back_expired,
    instance_registered,
    pin_enqueued,
    /// Moves the claim cursors of some queues forward (migration 9).
    cursor_advance,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{body, load};

    /// Every `.sql` file of `sql/` and of its folders (`sql/limits/`), by path under
    /// `sql/`.
    fn files() -> Vec<(String, String)> {
        let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"));
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).expect("sql/ is readable") {
                let path = e.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let name = path
                    .strip_prefix(&root)
                    .ok()
                    .and_then(|n| n.to_str())
                    .expect("a file name")
                    .to_owned();
                if name.ends_with(".sql") {
                    files.push((name, std::fs::read_to_string(&path).expect("a SQL file")));
                }
            }
        }
        files.sort();
        files
    }

    /// The parameter numbers in `text`: every `$n`, and every number of a `$a .. $b`.
    fn params(text: &str) -> BTreeSet<u32> {
        let mut found = BTreeSet::new();
        let mut rest = text;
        let mut last = None;
        while let Some(at) = rest.find('$') {
            let digits: String = rest[at + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let between = &rest[..at];
            if let Ok(n) = digits.parse::<u32>() {
                match last {
                    Some(a) if between.trim() == ".." => found.extend(a..=n),
                    _ => {
                        found.insert(n);
                    }
                }
                last = Some(n);
            }
            rest = &rest[at + 1 + digits.len()..];
        }
        found
    }

    /// The comment lines of a file.
    fn header(file: &str) -> String {
        file.lines()
            .map(str::trim)
            .filter(|l| l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn every_statement_file_names_exactly_the_parameters_it_uses() {
        let files = files();
        assert!(files.len() > 40, "found only {} files", files.len());
        for (name, text) in &files {
            let used = params(&load(text, "s"));
            let listed = params(&header(text));
            assert_eq!(
                used, listed,
                "{name}: parameters used vs listed in its comment"
            );
        }
    }

    #[test]
    fn every_statement_loads_to_one_line_of_sql_with_nothing_left_to_fill() {
        for (name, text) in files() {
            let sql = load(&text, "tenure_x");
            assert!(!sql.contains('{') && !sql.contains('}'), "{name}: {sql}");
            assert!(!sql.contains("--"), "{name}: a comment after code: {sql}");
            assert!(!sql.contains('\n'), "{name}");
            assert!(sql.len() > 10, "{name}: {sql}");
        }
        assert_eq!(
            body("-- a\n  SELECT 1\n\n  -- b\n    FROM t\n"),
            "SELECT 1 FROM t"
        );
    }
}
