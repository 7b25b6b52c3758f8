//! The suite proves it can fail: it passes against the memory store, and each
//! deliberately broken wrapper around that store fails the group of the guarantee it
//! breaks. This tells flaws in a store from flaws in the suite.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_conformance::{
    cases, run_all, run_case, Capability, Case, CaseResult, Env, Harness, Report, Status, Verdict,
};
use tenure_conformance::{Restore, Snapshot, Unreachable};
use tenure_core::NewItem;
use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, Item, ItemId,
    ItemState, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease, LeaseToken, ManualClock,
    PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams,
    RenewOutcome, RenewParams, RequeueParams, Result, Retry, Schedule, ScopeKey, Store, StreamKey,
    TokenOutcome, MAX_ATTEMPTS_LIMIT,
};
use tenure_core::{
    CancelOutcome, CancelParams, Clock, Cursor, DeadFilter, DedupKey, ItemListParams, ItemPage,
    LeaseListParams, LeasePage, ListState, OwnerId, PauseParams, MAX_PAGE,
};
use tenure_core::{
    DeferParams, FairnessKey, LimitKey, LimitsParams, QueueLimits, Rate, Timestamp, MAX_CONCURRENCY,
};
use tenure_memory::{MemorySnapshot, MemoryStore};

mod broken;
mod harness;

use broken::*;
use harness::*;

mod g01;
mod g02;
mod g03;
mod g04;
mod g05;
mod g06;
mod g07;
mod g08;
mod g09;
mod g10;
mod g11;
mod g12;
mod g13;
mod g14;
mod g15;
mod g16;
mod g17;
mod g18;
mod memory_store;
mod op_control;
mod op_control_streams;
mod op_history;
mod op_inspection;
mod registry;
