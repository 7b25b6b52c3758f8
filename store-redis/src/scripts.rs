//! The Lua scripts, one per operation, each with the helpers of `lib.lua` it uses in
//! front.
//!
//! A script is sent once per server (`EVALSHA`; on `NOSCRIPT`, as after a restart or
//! `SCRIPT FLUSH`, the driver loads it and runs it again), so a call sends only the
//! script's hash and its arguments. Redis runs a script's whole text on every call, so
//! each helper it defines costs a closure per call: [`with_lib`] puts in front of an
//! operation only the `lib.lua` definitions its text names, directly or through
//! another definition, in `lib.lua`'s order (each definition comes after those it
//! uses).

use std::sync::LazyLock;

use redis::Script;

const LIB: &str = include_str!("scripts/lib.lua");

/// The compiled script of every operation, in contract order.
pub(crate) struct Scripts {
    pub(crate) enqueue: Script,
    pub(crate) claim: Script,
    pub(crate) renew: Script,
    pub(crate) complete: Script,
    pub(crate) fail: Script,
    pub(crate) release: Script,
    pub(crate) recover: Script,
    pub(crate) purge: Script,
    pub(crate) requeue: Script,
    pub(crate) discard: Script,
    pub(crate) item_get: Script,
    pub(crate) queue_counts: Script,
    pub(crate) heartbeat: Script,
    pub(crate) instance_list: Script,
    pub(crate) evict: Script,
    pub(crate) deregister: Script,
    pub(crate) leader_acquire: Script,
    pub(crate) leader_resign: Script,
}

/// One top-level definition of `lib.lua`: the name it defines and its text (with the
/// comment lines above it).
struct Definition<'a> {
    name: &'a str,
    text: String,
}

/// Splits `lib.lua` at its top-level `local` definitions. The file's leading comment
/// goes with the first one.
fn definitions(lib: &str) -> Vec<Definition<'_>> {
    let mut out: Vec<Definition<'_>> = Vec::new();
    let mut pending = String::new();
    for line in lib.lines() {
        let defined = line
            .strip_prefix("local function ")
            .or_else(|| line.strip_prefix("local "))
            .map(|rest| {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .filter(|name| !name.is_empty());
        match defined {
            Some(name) => {
                let mut text = std::mem::take(&mut pending);
                text.push_str(line);
                text.push('\n');
                out.push(Definition { name, text });
            }
            None if line.starts_with("--") || line.trim().is_empty() => {
                pending.push_str(line);
                pending.push('\n');
            }
            None => {
                // A continuation of the last definition (a function body, a table).
                if let Some(last) = out.last_mut() {
                    last.text.push_str(&pending);
                    pending.clear();
                    last.text.push_str(line);
                    last.text.push('\n');
                }
            }
        }
    }
    out
}

/// True when `text` names `word` as a whole identifier.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The operation's text with the definitions it needs in front.
fn assemble(lib: &str, op: &str) -> String {
    let defs = definitions(lib);
    let mut needed = vec![false; defs.len()];
    // Later definitions only use earlier ones, so one pass from the end settles it.
    for i in (0..defs.len()).rev() {
        let used_later = defs[i + 1..]
            .iter()
            .zip(&needed[i + 1..])
            .any(|(d, n)| *n && names(&d.text, defs[i].name));
        needed[i] = used_later || names(op, defs[i].name);
    }
    let mut script: String = defs
        .iter()
        .zip(&needed)
        .filter(|(_, n)| **n)
        .map(|(d, _)| d.text.as_str())
        .collect();
    script.push('\n');
    script.push_str(op);
    script
}

fn with_lib(op: &str) -> Script {
    Script::new(&assemble(LIB, op))
}

/// Built once per process.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    enqueue: with_lib(include_str!("scripts/enqueue.lua")),
    claim: with_lib(include_str!("scripts/claim.lua")),
    renew: with_lib(include_str!("scripts/renew.lua")),
    complete: with_lib(include_str!("scripts/complete.lua")),
    fail: with_lib(include_str!("scripts/fail.lua")),
    release: with_lib(include_str!("scripts/release.lua")),
    recover: with_lib(include_str!("scripts/recover.lua")),
    purge: with_lib(include_str!("scripts/purge.lua")),
    requeue: with_lib(include_str!("scripts/requeue.lua")),
    discard: with_lib(include_str!("scripts/discard.lua")),
    item_get: with_lib(include_str!("scripts/item_get.lua")),
    queue_counts: with_lib(include_str!("scripts/queue_counts.lua")),
    heartbeat: with_lib(include_str!("scripts/heartbeat.lua")),
    instance_list: with_lib(include_str!("scripts/instance_list.lua")),
    evict: with_lib(include_str!("scripts/evict.lua")),
    deregister: with_lib(include_str!("scripts/deregister.lua")),
    leader_acquire: with_lib(include_str!("scripts/leader_acquire.lua")),
    leader_resign: with_lib(include_str!("scripts/leader_resign.lua")),
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_gets_the_definitions_it_names_and_theirs_in_order() {
        let lib = "-- header\nlocal P = KEYS[1]\nlocal function k_a(x) return P .. x end\n\
                   -- b uses a\nlocal function b(x)\n  return k_a(x)\nend\n\
                   local function unused() return 1 end\n";
        let s = assemble(lib, "return b(1)\n");
        assert!(s.starts_with("-- header\nlocal P = KEYS[1]\n"), "{s}");
        let (p, a, b) = (
            s.find("local P").unwrap(),
            s.find("local function k_a").unwrap(),
            s.find("local function b").unwrap(),
        );
        assert!(p < a && a < b, "{s}");
        assert!(s.contains("  return k_a(x)\nend\n"), "{s}");
        assert!(!s.contains("unused"), "{s}");
        // A name inside a longer identifier is not a use.
        assert!(!assemble(lib, "return bb(1)\n").contains("local function b("));
    }

    #[test]
    fn every_script_keeps_the_root_key_and_drops_what_it_never_names() {
        let claim = assemble(LIB, include_str!("scripts/claim.lua"));
        assert!(claim.contains("local P = KEYS[1]"));
        assert!(!claim.contains("local function k_leader"));
        let leader = assemble(LIB, include_str!("scripts/leader_acquire.lua"));
        assert!(leader.contains("local function k_leader"));
        assert!(!leader.contains("local function place_due"));
    }
}
