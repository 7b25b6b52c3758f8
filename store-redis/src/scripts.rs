//! The Lua scripts, one per operation, each with the shared `lib.lua` in front.
//!
//! A script is sent once per server (`EVALSHA`; on `NOSCRIPT`, as after a restart or
//! `SCRIPT FLUSH`, the driver loads it and runs it again), so a call sends only the
//! script's hash and its arguments.

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

fn with_lib(op: &str) -> Script {
    Script::new(&format!("{LIB}\n{op}"))
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
