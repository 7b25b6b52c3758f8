//! Argument handling of the examples, and [`replace_store_file`], which deletes a file
//! only when it is a Tenure SQLite database.
//!
//! Each example's `main` starts with [`parse`]: `-h` / `--help` prints the usage and
//! exits 0; an unknown option or too many arguments prints the problem and the usage
//! and exits 2; nothing is touched in either case.

use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// `-h` or `--help`: print the usage, do nothing else.
    Help,
    /// Run, with the positional arguments given (at most the number allowed).
    Run(Vec<OsString>),
}

/// A command line the example refuses, with why.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Parses `args` (without the program name): `-h` / `--help` anywhere before `--`
/// asks for help; any other argument starting with `-` is refused, unless it follows
/// `--`; at most `max_positional` other arguments are accepted.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    max_positional: usize,
) -> Result<Parsed, UsageError> {
    let mut positional = Vec::new();
    let mut options_done = false;
    for arg in args {
        let text = arg.to_string_lossy();
        if !options_done && text.starts_with('-') && text != "-" {
            match text.as_ref() {
                "-h" | "--help" => return Ok(Parsed::Help),
                "--" => options_done = true,
                other => return Err(UsageError(format!("unknown option {other:?}"))),
            }
            continue;
        }
        positional.push(arg);
    }
    if positional.len() > max_positional {
        return Err(UsageError(match max_positional {
            0 => "this example takes no arguments".to_owned(),
            1 => "expected at most one argument".to_owned(),
            n => format!("expected at most {n} arguments"),
        }));
    }
    Ok(Parsed::Run(positional))
}

/// Runs [`parse`] on the process's arguments: prints `usage` and exits 0 for help,
/// prints the problem and `usage` to stderr and exits 2 for a refused command line,
/// and returns the positional arguments otherwise.
pub fn parse_or_exit(usage: &str, max_positional: usize) -> Vec<OsString> {
    match parse(std::env::args_os().skip(1), max_positional) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            println!("{usage}");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{usage}");
            std::process::exit(2);
        }
    }
}

/// What [`inspect`] found at a path.
#[derive(Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Nothing is there.
    Missing,
    /// An SQLite database holding Tenure's tables (`tenure_meta`).
    TenureStore,
    /// Anything else: not a regular file, empty, not SQLite, or SQLite without
    /// Tenure's tables. Says what.
    Other(String),
}

/// Looks at `path` without writing to it.
pub fn inspect(path: &Path) -> FileKind {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileKind::Missing,
        Err(e) => return FileKind::Other(format!("it cannot be read ({e})")),
    };
    if !meta.is_file() {
        return FileKind::Other("it is not a regular file".to_owned());
    }
    if meta.len() == 0 {
        return FileKind::Other("it is empty".to_owned());
    }
    let mut header = [0u8; 16];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    if read.is_err() || &header != b"SQLite format 3\0" {
        return FileKind::Other("it is not an SQLite database".to_owned());
    }
    let has_meta = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|c| {
        c.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'tenure_meta'",
            [],
            |r| r.get::<_, bool>(0),
        )
    });
    match has_meta {
        Ok(true) => FileKind::TenureStore,
        Ok(false) => FileKind::Other("it is an SQLite database without Tenure's tables".to_owned()),
        Err(e) => FileKind::Other(format!("it cannot be read as an SQLite database ({e})")),
    }
}

/// `path` with `suffix` appended (`work.db` and `-wal` give `work.db-wal`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// Makes room for a fresh store at `path`: nothing to do when nothing is there; a
/// Tenure database is deleted with its `-wal` and `-shm` files; anything else is
/// refused and left as it is.
pub fn replace_store_file(path: &Path) -> Result<(), UsageError> {
    match inspect(path) {
        FileKind::Missing => Ok(()),
        FileKind::TenureStore => {
            for suffix in ["", "-wal", "-shm"] {
                let p = with_suffix(path, suffix);
                match std::fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(UsageError(format!("cannot remove {}: {e}", p.display())))
                    }
                }
            }
            Ok(())
        }
        FileKind::Other(why) => Err(UsageError(format!(
            "{} is not a Tenure database ({why}); it was left alone: name a new file \
             or a Tenure database to replace",
            path.display()
        ))),
    }
}
