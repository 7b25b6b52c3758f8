//! The Lua code: one Redis function library holding `lib.lua`'s helpers and one
//! function per operation.
//!
//! The library is loaded once per server (`FUNCTION LOAD`; when a call answers
//! `Function not found`, as after a restart without persistence or a `FUNCTION
//! FLUSH`, the store loads it and calls again), so a call sends only the function's
//! name and its arguments. Unlike a script sent with `EVALSHA`, whose whole text runs
//! on every call (each helper it defines a closure built per call, some 4 µs for
//! `lib.lua`'s forty here), a library's top level runs once, at load: a call runs
//! only its own operation.
//!
//! The library's name and its functions' names carry a hash of its text
//! (`tenure_<hash>`, `tenure_<hash>_claim`), so stores of different versions share
//! a server without calling each other's code.

use std::sync::LazyLock;

use redis::Script;

const LIB: &str = include_str!("scripts/lib.lua");

/// The operations, by the name their function is registered under (after the
/// library's tag), with their Lua bodies.
const OPS: [(&str, &str); 33] = [
    ("enqueue", include_str!("scripts/enqueue.lua")),
    ("claim", include_str!("scripts/claim.lua")),
    ("renew", include_str!("scripts/renew.lua")),
    ("complete", include_str!("scripts/complete.lua")),
    ("fail", include_str!("scripts/fail.lua")),
    ("release", include_str!("scripts/release.lua")),
    ("recover", include_str!("scripts/recover.lua")),
    ("purge", include_str!("scripts/purge.lua")),
    ("requeue", include_str!("scripts/requeue.lua")),
    ("discard", include_str!("scripts/discard.lua")),
    ("item_get", include_str!("scripts/item_get.lua")),
    ("queue_counts", include_str!("scripts/queue_counts.lua")),
    ("heartbeat", include_str!("scripts/heartbeat.lua")),
    ("instance_list", include_str!("scripts/instance_list.lua")),
    ("evict", include_str!("scripts/evict.lua")),
    ("deregister", include_str!("scripts/deregister.lua")),
    ("leader_acquire", include_str!("scripts/leader_acquire.lua")),
    ("leader_resign", include_str!("scripts/leader_resign.lua")),
    ("leader_get", include_str!("scripts/leader_get.lua")),
    ("item_list", include_str!("scripts/item_list.lua")),
    ("lease_list", include_str!("scripts/lease_list.lua")),
    ("queue_list", include_str!("scripts/queue_list.lua")),
    ("cancel", include_str!("scripts/cancel.lua")),
    ("pause", include_str!("scripts/pause.lua")),
    ("dead_matching", include_str!("scripts/dead_matching.lua")),
    ("limits_set", include_str!("scripts/limits_set.lua")),
    ("limits_get", include_str!("scripts/limits_get.lua")),
    ("limits_clear", include_str!("scripts/limits_clear.lua")),
    ("limits_list", include_str!("scripts/limits_list.lua")),
    ("limits_defer", include_str!("scripts/limits_defer.lua")),
    ("limits_wait", include_str!("scripts/limits_wait.lua")),
    ("history_add", include_str!("scripts/history_add.lua")),
    ("history", include_str!("scripts/history.lua")),
];

/// Stands for the library's tag in the text that is hashed.
const TAG: &str = "__TENURE_TAG__";

/// The library text and the function name of every operation, in contract order.
pub(crate) struct Scripts {
    /// The whole library, as `FUNCTION LOAD` takes it.
    pub(crate) library: String,
    pub(crate) enqueue: String,
    pub(crate) claim: String,
    pub(crate) renew: String,
    pub(crate) complete: String,
    pub(crate) fail: String,
    pub(crate) release: String,
    pub(crate) recover: String,
    pub(crate) purge: String,
    pub(crate) requeue: String,
    pub(crate) discard: String,
    pub(crate) item_get: String,
    pub(crate) queue_counts: String,
    pub(crate) heartbeat: String,
    pub(crate) instance_list: String,
    pub(crate) evict: String,
    pub(crate) deregister: String,
    pub(crate) leader_acquire: String,
    pub(crate) leader_resign: String,
    pub(crate) leader_get: String,
    pub(crate) item_list: String,
    pub(crate) lease_list: String,
    pub(crate) queue_list: String,
    pub(crate) cancel: String,
    pub(crate) pause: String,
    pub(crate) dead_matching: String,
    pub(crate) limits_set: String,
    pub(crate) limits_get: String,
    pub(crate) limits_clear: String,
    pub(crate) limits_list: String,
    pub(crate) limits_defer: String,
    pub(crate) limits_wait: String,
    pub(crate) history_add: String,
    pub(crate) history: String,
}

/// The library of `lib` and `ops`: `lib` at the top, then each operation's body as
/// a registered function whose first act is `set_root(KEYS[1])`. Answers the text
/// and the registered names, in `ops` order.
fn library(lib: &str, ops: &[(&str, &str)]) -> (String, Vec<String>) {
    let mut body = String::from(lib);
    for (name, op) in ops {
        body.push_str(&format!(
            "\nredis.register_function('tenure_{TAG}_{name}', function(KEYS, ARGV)\n\
             set_root(KEYS[1])\n{op}\nend)\n"
        ));
    }
    // The tag: the first 16 hex digits of the SHA-1 of the text without it.
    let hash = Script::new(&body).get_hash().to_owned();
    let tag = &hash[..16];
    let text = format!("#!lua name=tenure_{tag}\n{}", body.replace(TAG, tag));
    let names = ops
        .iter()
        .map(|(name, _)| format!("tenure_{tag}_{name}"))
        .collect();
    (text, names)
}

/// Built once per process.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let (library, names) = library(LIB, &OPS);
    let mut n = names.into_iter();
    let mut next = || n.next().unwrap_or_default();
    Scripts {
        enqueue: next(),
        claim: next(),
        renew: next(),
        complete: next(),
        fail: next(),
        release: next(),
        recover: next(),
        purge: next(),
        requeue: next(),
        discard: next(),
        item_get: next(),
        queue_counts: next(),
        heartbeat: next(),
        instance_list: next(),
        evict: next(),
        deregister: next(),
        leader_acquire: next(),
        leader_resign: next(),
        leader_get: next(),
        item_list: next(),
        lease_list: next(),
        queue_list: next(),
        cancel: next(),
        pause: next(),
        dead_matching: next(),
        limits_set: next(),
        limits_get: next(),
        limits_clear: next(),
        limits_list: next(),
        limits_defer: next(),
        limits_wait: next(),
        history_add: next(),
        history: next(),
        library,
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_a_function_named_with_the_tag_of_the_library_text() {
        let (text, names) = library("local P\n", &[("a", "return 1"), ("b", "return 2")]);
        let header = text.lines().next().unwrap();
        let tag = header.strip_prefix("#!lua name=tenure_").unwrap();
        assert_eq!(tag.len(), 16, "{header}");
        assert_eq!(
            names,
            [format!("tenure_{tag}_a"), format!("tenure_{tag}_b")]
        );
        for n in &names {
            assert!(
                text.contains(&format!("redis.register_function('{n}'")),
                "{text}"
            );
        }
        assert!(!text.contains(TAG), "{text}");
        // Another text, another tag: versions never share a function name.
        let (other, _) = library("local P\n", &[("a", "return 3"), ("b", "return 2")]);
        assert_ne!(other.lines().next(), Some(header));
    }

    #[test]
    fn the_real_library_names_every_operation_once() {
        let s = &*SCRIPTS;
        assert_eq!(
            s.library.matches("redis.register_function(").count(),
            OPS.len()
        );
        assert!(s
            .library
            .contains(&format!("redis.register_function('{}'", s.claim)));
        assert!(s.claim.ends_with("_claim") && s.leader_resign.ends_with("_leader_resign"));
    }
}
