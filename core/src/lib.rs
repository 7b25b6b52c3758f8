//! Tenure's core: every unit of work has exactly one temporary owner at a time.
//!
//! This crate holds the model ([`Item`], [`Lease`], [`LeaseToken`]), the validated keys,
//! the lease state machine ([`machine`]), the [`Store`] contract every backend
//! implements, the classified [`Error`], the [`Clock`], the [`RetryPolicy`], typed
//! [`Task`]s and the conveniences of [`StoreExt`].
//!
//! # Guarantees
//!
//! Each guarantee is a conformance group in `tenure-conformance`; every store passes
//! all of them.
//!
//! | | guarantee | group |
//! |---|---|---|
//! | G1 | at most one live lease per item | `g01_exclusive_claim` |
//! | G2 | an expired lease is reclaimable with `attempt + 1`, counting a stall | `g02_expiry` |
//! | G3 | writes with a superseded token answer lease lost and change nothing | `g03_fenced_finalize` |
//! | G4 | renewals are capped per attempt | `g04_renewal_cap` |
//! | G5 | retry with backoff; dead after max attempts; requeue and discard | `g05_retry` |
//! | G6 | dead after max stalls | `g06_stalls` |
//! | G7 | nothing is claimed before its `run_at` | `g07_schedule` |
//! | G8 | priority, then `run_at`, then enqueue order | `g08_order` |
//! | G9 | strict FIFO within a stream | `g09_stream_fifo` |
//! | G10 | at most one running item per scope | `g10_scope` |
//! | G11 | dedup keys within their window | `g11_dedup` |
//! | G12 | stale instances evicted, their leases released | `g12_instances` |
//! | G13 | one leader per name, increasing terms | `g13_leader` |
//! | G15 | bad input named and nothing written | `g15_bad_input` |
//!
//! # Example
//!
//! ```
//! # async fn demo(store: &dyn tenure_core::Store) -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//!
//! let queue = QueueName::new("emails")?;
//! store.enqueue_one(NewItem::new(queue.clone(), b"hello".to_vec())).await?;
//! let me = OwnerId::new("worker-1")?;
//! if let Some(lease) = store.claim_one(queue, me, Duration::from_secs(30)).await? {
//!     // ... do the work ...
//!     store.complete_one(lease.token).await?;
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod contract;
mod error;
mod ext;
mod keys;
pub mod machine;
mod model;
mod operate;
pub mod partition;
mod retry;
mod store;
mod task;
mod time;
mod url;

pub use error::{BoxError, Error, ErrorKind, Result};
pub use ext::StoreExt;
pub use keys::{
    validate_identifier, DedupKey, FairnessKey, LeaderName, LimitKey, OwnerId, QueueName, ScopeKey,
    StreamKey, DEFAULT_LEADER_NAME, MAX_KEY_BYTES, MAX_NAME_BYTES,
};
pub use model::{
    Enqueued, Evicted, FailOutcome, Instance, Item, ItemId, ItemState, LeaderInfo, LeaderStatus,
    Lease, LeaseId, LeaseToken, NewItem, Purged, QueueCounts, Recovered, RenewOutcome, Schedule,
    TokenOutcome, DEFAULT_DEDUP_WINDOW, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RENEWALS,
    DEFAULT_MAX_STALLS, MAX_ATTEMPTS_LIMIT, MAX_WEIGHT,
};
pub use model::{Progress, MAX_PROGRESS_MESSAGE_BYTES};
pub use operate::{
    CancelOutcome, Cursor, ItemPage, LeaseInfo, LeasePage, ListOrder, ListState, MAX_CURSOR_BYTES,
};
pub use partition::Partitioning;
pub use retry::RetryPolicy;
pub use store::MAX_CANCEL_BY_BYTES;
pub use store::{
    history_minute, HistoryAddParams, HistoryCounts, HistoryEntry, HistoryParams, HistoryPoint,
    HISTORY_KEEP, MAX_HISTORY_ENTRIES, MAX_HISTORY_SPAN,
};
pub use store::{
    CancelParams, DeadFilter, ItemListParams, LeaseListParams, PauseParams, DEFAULT_DEAD_BATCH,
    DEFAULT_PAGE, MAX_DEAD_BATCH, MAX_PAGE,
};
pub use store::{
    Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams, EnqueueParams,
    EvictParams, FailParams, Failure, HeartbeatParams, LeaderParams, Limits, PurgeParams,
    RecoverParams, ReleaseParams, RenewParams, RequeueParams, Retry, Store, WakeHealth, WakeSignal,
    DEFAULT_STALE_AFTER, MAX_ERROR_BYTES, MAX_STREAM_RUN,
};
pub use store::{
    DeferParams, LimitsParams, QueueLimits, Rate, MAX_CONCURRENCY, MAX_DEFER, MAX_LIMIT_ENTRIES,
    MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_PERIOD,
};
pub use store::{DEFAULT_MAX_CLAIM_QUEUES, DEFAULT_SCHEDULE_WINDOW};
pub use task::{task_queue, Task, TaskOptions};
pub use time::{duration_micros, Clock, ManualClock, SharedClock, SystemClock, Timestamp};
pub use url::{take_url_param, url_in_schemes, url_scheme};

/// Re-exported so stores and tests name the same version.
pub use async_trait::async_trait;
