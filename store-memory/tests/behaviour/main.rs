//! One test per behaviour of the memory store, grouped by guarantee.
//!
//! This file holds the helpers; each guarantee's module is a file beside it, named as
//! its conformance group is.
// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

use tenure_test_support::memory as common;

use std::time::Duration;

use common::*;
use tenure_core::machine::STALLED_ERROR_PREFIX;
use tenure_core::{
    ClaimParams, CompleteParams, DedupKey, DiscardParams, EnqueueParams, Error, ErrorKind,
    EvictParams, FailOutcome, Failure, HeartbeatParams, ItemId, ItemState, LeaderName,
    LeaderParams, LeaderStatus, Lease, PurgeParams, RecoverParams, ReleaseParams, RenewOutcome,
    RenewParams, RequeueParams, Store, StoreExt, TokenOutcome,
};
use tenure_memory::MemoryStore;

fn enqueue(s: &MemoryStore, items: Vec<tenure_core::NewItem>) -> Vec<ItemId> {
    run(s.enqueue(EnqueueParams::new(items)))
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

fn claim(s: &MemoryStore, queue: &str, who: &str, limit: u32) -> Vec<Lease> {
    run(s.claim(ClaimParams::new(q(queue), owner(who), limit, LEASE))).unwrap()
}

fn ids(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

fn state(s: &MemoryStore, id: ItemId) -> Option<ItemState> {
    run(s.item_get(id)).unwrap().map(|i| i.state)
}

mod g01_exclusive_claim;
mod g02_expiry;
mod g03_fenced_finalize;
mod g04_renewal_cap;
mod g05_retry;
mod g06_stalls;
mod g07_schedule;
mod g08_order;
mod g09_stream_fifo;
mod g10_scope;
mod g11_dedup;
mod g12_instances;
mod g13_leader;
mod g15_bad_input;
mod memory_store;
