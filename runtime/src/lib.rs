//! Tenure's worker runtime on tokio.
//!
//! `tenure-core` is the contract (the model, the [`Store`](tenure_core::Store) trait,
//! errors, the clock); this crate drives it. The `tenure` crate re-exports it as
//! `tenure::runtime`, with [`Worker`] and its companions at its root as well.
//!
//! A [`Worker`] serves one or more queues of any [`Store`](tenure_core::Store) with a
//! [`Handler`]:
//!
//! - **Claim loop.** Claims for its free handler slots, plus a
//!   [`prefetch`](WorkerBuilder::prefetch) while handlers are short (one claim batch,
//!   three from [`WIDE_FROM`] slots up; less as handlers get longer, so a queued lease
//!   waits at most a quarter of a renewal interval on average), so the next leases
//!   arrive while the slots are busy. While the queue has work (the last answer
//!   filled what it asked) up to [`claims_in_flight`](WorkerBuilder::claims_in_flight)
//!   claims are out at once; otherwise one poll at a time, waiting by the
//!   [`PollPolicy`] (250 ms, doubling from the second consecutive empty poll, capped
//!   at 10 s; reset by any non-empty claim). A failed claim is tried again within
//!   [`FAILED_CLAIM_RETRY_CAP`] (500 ms), whatever the wake-ups say, so a worker is
//!   back at work as soon as its store is. The store's
//!   [`wake_signal`](tenure_core::Store::wake_signal) ends any wait at once.
//! - **Slots.** Claimed leases queue in claim order, each as its [`Job`]; at most
//!   `concurrency` of them (or of their stream runs) run at once. A few runner tasks
//!   (one per runtime thread at most) work the queue: each polls the next handler
//!   once on its own task, so a handler that finishes at once costs no task, timer or
//!   wake-up. A handler that does not finish keeps that task, which supervises it to
//!   its end and then takes more leases, while a new runner takes its place: a task
//!   per busy slot, never per attempt. A prefetched lease still waiting for a slot
//!   when its renewal comes due is given back, never renewed; prefetched leases are
//!   leased in the store, so G9 and G10 hold for them as for running items.
//! - **Renewal.** In-flight leases are renewed a third of a lease after their last
//!   successful renewal, from a schedule ordered by due time (never a scan of every
//!   attempt), in coalesced batches (one `renew` call per flush), each call
//!   with its own timeout. The renewal cap of G4 applies: a capped lease is not renewed
//!   again. A "lease lost" answer cancels that handler at once and its outcome is
//!   discarded.
//! - **Self-stop.** A handler's cancellation fires when half a lease has passed since
//!   its last successful renewal, on a timer of its own, so it fires even when a
//!   renewal call hangs. A self-stopped attempt writes nothing; recovery re-queues the
//!   item and counts a stall (G2, G6). Because a lease is only reclaimable once it has
//!   fully expired, an attempt has stopped (or been told to) at least half a lease
//!   before anyone else can claim its item: that margin absorbs clock skew between
//!   workers and the time a handler takes to honour its token. A handler that ignores
//!   its token is dropped at its next `.await` half a lease after the cancellation.
//!   The cancellation token of an attempt is made only when someone waits on it
//!   ([`Job::cancelled`], [`Job::cancel_token`]) or its handler did not finish on
//!   its first poll; [`Job::is_cancelled`] and [`Job::stop_reason`] need none.
//! - **Finalize.** Outcomes are left in an outbox (one short lock each) and
//!   coalesced (up to N tokens or T ms) and written fenced:
//!   at most one `complete` and one `fail` call per flush, with up to two flushes out
//!   at once. `Ok` completes; a retryable
//!   [`JobError`] retries after the [`RetryPolicy`](tenure_core::RetryPolicy) delay; a
//!   permanent one makes the item dead; a panic is a retryable failure carrying the
//!   panic message, and the worker lives on. With a
//!   [`handler_timeout`](WorkerBuilder::handler_timeout), a handler still running when
//!   it fires is cancelled and its attempt is a retryable failure too.
//! - **Typed tasks.** [`WorkerBuilder::task`] runs a [`Task`](tenure_core::Task) type
//!   ([`RunTask`]), [`WorkerBuilder::task_with`] a closure of the decoded value
//!   ([`TaskHandler`]). A worker claims its tasks' queues and its closure handler's in
//!   one claim and hands each lease to its queue's handler; every guarantee here holds
//!   for tasks unchanged. A payload that does not decode as its type is a permanent
//!   failure naming the type and the serde error.
//! - **Finalize in the handler's own transaction.** A handler that calls
//!   [`Job::take_finalize`] gets the attempt's token to complete the item inside its
//!   own database transaction, with its business write (`complete_in_tx` on the SQLite
//!   and PostgreSQL stores); the runtime then writes no completion for that attempt,
//!   and stops renewing it once the handler returns `Ok`. An error returned after
//!   taking over is recorded as a fenced failure, which the fence refuses if the
//!   handler's own finalize had committed.
//! - **Instances and maintenance.** The instance registers and heartbeats on its own
//!   timer. Recovery of expired leases, the purge, and eviction of stale instances run
//!   only on the holder of the leader lease; [`Worker::role`] reports Leader, Follower
//!   or Faulted (a store error is Faulted, never Follower).
//! - **Periodic jobs.** [`WorkerBuilder::periodic`] declares a [`Periodic`] job (a cron
//!   expression read in UTC, or a fixed interval); the leader enqueues each tick
//!   ahead of time as a scheduled item with a dedup key per tick, so a tick is
//!   enqueued once across all instances and leader changes, and a tick missed during
//!   downtime once (see [`Missed`]).
//! - **Graceful shutdown.** [`Worker::shutdown`] stops claiming, waits for in-flight
//!   work up to a grace period, then cancels what still runs and releases those leases
//!   so peers take them at once; the instance then leaves the registry
//!   ([`Store::instance_deregister`](tenure_core::Store::instance_deregister)) unless a
//!   handler would not stop, whose lease must run out instead.
//! - **Observability.** `tracing` spans (`tenure.worker`, `tenure.job`) and events with
//!   an `event` field: `claim`, `renew`, `complete`, `fail`, `lost`, `self-stop`,
//!   `timeout`, `panic`, `release`, `role`, `recover`, `evict`. [`Worker::metrics`]
//!   returns a [`MetricsSnapshot`].
//! - **Claim loop and wake-up health.** The poll interval follows the health of the
//!   store's cross-process wake-ups ([`WakeHealth`](tenure_core::WakeHealth) on its
//!   [`WakeSignal`](tenure_core::WakeSignal)): from a relaxed 5 s baseline while a LISTEN or
//!   pub/sub listener delivers them, at the tight base without backoff while it is
//!   down, or not at all in NOTIFY-only mode ([`PollPolicy`]).
//! - **Draining.** [`Worker::set_heartbeat`]`(false)` stops the instance heartbeat, so
//!   peers evict the instance after `stale_after` and take over its leases.
//!
//! # One lease, claim to finalize
//!
//! How the runtime's files (under `runtime/src/`) share the work, for whoever
//! changes it. Each step names the file that does it; the state it reads and writes is
//! in brackets (see the layers below).
//!
//! ```text
//!  store              worker                                            file
//!  -----              ------                                            ----
//!  claim  --leases--> ask for the room free now; record each attempt    claim.rs
//!                     in flight, queue it as a Job, wake a runner       dispatch.rs
//!                     [room, inflight, slots]
//!                         |
//!                         v
//!                     a runner takes a slot and calls the handler;      dispatch.rs
//!                     one that pends is supervised on that task:        supervise.rs
//!                     self-stop, handler timeout, abort  [slots]
//!                         |                       ^
//!  renew  <--tokens-- every third of a lease      | "lease lost":       renew.rs
//!         --answers-> reschedule, or stop it -----+ stop the attempt
//!                     [inflight]
//!                         |
//!                         v
//!                     the handler's answer becomes an outcome,          supervise.rs
//!                     posted to the outbox  [outbox, room]
//!                         |
//!                         v
//!  complete, fail     coalesced flush, fenced by the lease token;       finalize.rs
//!         <--tokens-- the answered attempt is forgotten and its
//!         --answers-> place in the room freed  [outbox, inflight, room]
//!
//!  release <--------- leases never started (claimed during shutdown,   release.rs
//!                     prefetched past their renewal) or stopped by
//!                     shutdown
//!  heartbeat, leader  on their own timers; as leader: recover, purge,   instance.rs
//!  lease, recover...  evict, sample depths, enqueue periodic ticks      periodic_pass.rs
//!                     [standing]
//! ```
//!
//! # Layers
//!
//! Each file names (imports, or links to with `crate::file::`) only files below it
//! in this list, never one that names it back; `lib.rs` declares them in this order,
//! and `tests/runtime_layers.rs` checks both.
//!
//! | layer | file | owns |
//! | --- | --- | --- |
//! | handle | `builder.rs` | [`WorkerBuilder`]: options, defaults, the checks of `spawn` |
//! | | `worker.rs` | [`Worker`]: starts the loops, heartbeat switch, role, shutdown |
//! | loops | `claim.rs` | the claim loop: when to claim and how much |
//! | | `dispatch.rs` | a claim's leases recorded and queued; the runner tasks |
//! | | `supervise.rs` | one attempt: handler, timers, its outcome |
//! | | `renew.rs` | the renewal loop |
//! | | `finalize.rs` | the finalizer: batched, fenced complete and fail |
//! | | `instance.rs` | heartbeat, leader lease, maintenance |
//! | | `periodic_pass.rs` | the leader's enqueueing of periodic ticks |
//! | | `release.rs` | giving unfinished leases back |
//! | state | `shared.rs` | `Shared`: store, handler, settings, metrics, stop signals, and one field per state below |
//! | | `room.rs` | `Room`: how many leases the claim loop may hold; the prefetch rule |
//! | | `inflight.rs` | `Attempts`: the attempts held, their renewal schedule, spare controls |
//! | | `slots.rs` | `Slots`: the ready queue, the slot count, the runners |
//! | | `outbox.rs` | `Outbox`: outcomes waiting for the finalizer |
//! | | `standing.rs` | [`Role`] and `Standing`: heartbeat switch, first registration, role |
//! | vocabulary | `settings.rs` | `Settings`: what a running worker reads; `ClaimSizes`: the batch, claims out and prefetch |
//! | | `export.rs` | the `metrics` facade handles, [`describe_metrics`] |
//! | | `task.rs` | [`RunTask`], [`TaskHandler`] and the router of typed tasks |
//! | | `periodic.rs` | [`Periodic`], [`Recurrence`], [`Missed`] |
//! | | `poll.rs` | [`PollPolicy`] |
//! | | `handler.rs` | [`Handler`], [`Job`], [`JobError`] |
//! | | `attempt.rs` | one attempt's life: `Control`, its `Phase` and [`StopReason`], moved on by every loop above |
//! | | `metrics.rs` | [`MetricsSnapshot`] and its counters |
//! | | `panic.rs` | catching a panic in a polled future |
//!
//! # Metrics
//!
//! The runtime records through the [`metrics`](https://docs.rs/metrics) facade, so any
//! exporter works (the `metrics` example serves Prometheus text with
//! `metrics-exporter-prometheus`). Install the exporter's recorder **before** spawning
//! workers: a worker registers its handles once per queue when it starts and reuses
//! them for every job, so the hot path never formats a label; handles registered
//! before a recorder exists stay no-ops. [`describe_metrics`] adds help text and
//! units. [`Worker::metrics`] keeps returning the same counters, unlabelled, as a
//! [`MetricsSnapshot`].
//!
//! | name | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `tenure_claimed_total` | counter | `queue` | leases claimed |
//! | `tenure_completed_total` | counter | `queue` | completions the store accepted |
//! | `tenure_failed_total` | counter | `queue` | failures the store accepted (retrying or dead, panics and timeouts included) |
//! | `tenure_lost_total` | counter | `queue` | attempts whose lease was lost (a renewal or finalize answered "lease lost") |
//! | `tenure_renewed_total` | counter | `queue` | successful lease renewals, one per lease per renewal |
//! | `tenure_self_stopped_total` | counter | `queue` | attempts cancelled by the self-stop |
//! | `tenure_timed_out_total` | counter | `queue` | attempts stopped by the handler timeout |
//! | `tenure_handler_finalized_total` | counter | `queue` | attempts finalized by their own handler ([`Job::take_finalize`]): it returned `Ok`, or its error's fenced failure was refused with the item found finished at that attempt; not in completed or failed |
//! | `tenure_claim_seconds` | histogram | `queue` | one claim call, sent to answered; `queue` is the worker's queues joined by `,` |
//! | `tenure_pickup_seconds` | histogram | `queue` | from the item's `run_at` (its enqueue, or the end of its delay or retry backoff) to its handler's start: this process's wall clock read once per claim answer, plus tokio's clock from the claim to the start (so a wait for a slot counts on the clock tests pause) |
//! | `tenure_handler_seconds` | histogram | `queue` | handler run time, start to return (or drop) |
//! | `tenure_finalize_batch_size` | histogram | `queue` | outcomes written by one finalize flush; `queue` as for claims |
//! | `tenure_in_flight` | gauge | `queue` | handlers running now |
//! | `tenure_queue_depth` | gauge | `queue`, `state` | items by state (`ready`, `scheduled`, `running`, `dead`), sampled by the maintenance leader every maintenance interval |
//! | `tenure_queue_oldest_ready_age_seconds` | gauge | `queue` | how long the longest-waiting ready, due item has been claimable (0 when there is none), sampled with the depth |
//! | `tenure_limit_saturated_total` | counter | `queue` | empty polls that found the queue's due items all waiting for a slot: every limit key they name, or the queue, at its concurrency limit (G16); see below |
//! | `tenure_limit_rate_waits_total` | counter | `queue` | empty polls that found the queue's next start held back by a rate or a deferral (G17) |
//! | `tenure_limit_rate_wait_seconds` | histogram | `queue` | at each rate wait, how long the queue's next start was held back, as the store answered |
//!
//! The three `tenure_limit_*` series are counted after an empty poll whose
//! [`Store::limits_wait`](tenure_core::Store::limits_wait) answered a time, once per
//! served queue held back: a queue whose answer is its soonest lease's expiry waits for
//! a slot (saturated), any other answer is a rate's or a deferral's next start. Alert on
//! `tenure_limit_saturated_total` rising while `tenure_queue_depth{state="ready"}` stays
//! up (a key or the queue needs a higher limit or more capacity behind it), and on
//! `tenure_limit_rate_waits_total` rising with a backlog (the rate, not the workers,
//! sets the pace).
//!
//! Timers run on tokio's clock, so tests drive them with paused time; lease expiry is
//! the store's [`Clock`](tenure_core::Clock).
//!
//! ```no_run
//! # async fn demo(store: impl tenure_core::Store) -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_runtime::{Job, JobError, Worker};
//! use tenure_core::QueueName;
//!
//! let worker = Worker::builder(store)
//!     .queue(QueueName::new("thumbnails")?)
//!     .concurrency(4)
//!     .handler(|job: Job| async move {
//!         if job.payload().is_empty() {
//!             return Err(JobError::permanent("empty image"));
//!         }
//!         tokio::select! {
//!             _ = job.cancelled() => Err(JobError::retry("stopped")),
//!             _ = tokio::time::sleep(Duration::from_millis(10)) => Ok(()),
//!         }
//!     })
//!     .spawn()?;
//! worker.shutdown(Duration::from_secs(10)).await;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

// Declared top down: a file names only files declared after it (see "Layers" above).
// The handle and its builder.
mod builder;
// The Worker handle.
mod worker;
// Loops, each owning one job: the claim loop.
mod claim;
// What held a queue back after an empty poll (its limits' metrics).
mod limit_waits;
// A claim's leases recorded and queued, and the runners.
mod dispatch;
// One attempt, handler to outcome.
mod supervise;
// The renewal loop.
mod renew;
// The finalizer.
mod finalize;
// Heartbeat and maintenance.
mod instance;
// The leader's periodic pass.
mod periodic_pass;
// Counting finishes into the work history and flushing it to the store.
mod history_flush;
// Giving leases back.
mod release;
// State: what every loop shares, with one field per loop's own state.
mod shared;
// The claim loop's room counters.
mod room;
// The attempts held and their renewal schedule.
mod inflight;
// The ready queue, slots and runners.
mod slots;
// The finalizer's outbox.
mod outbox;
// Heartbeat switch and role.
mod standing;
// Vocabulary, with no state of its own: the settings.
mod settings;
// The metrics facade.
mod export;
// Typed tasks.
mod task;
// Periodic jobs.
mod periodic;
// The poll policy.
mod poll;
// Handler, Job, JobError.
mod handler;
mod history;
// One attempt's life: its control, phase and stop reason.
mod attempt;
// The counters.
mod metrics;
// Catching panics.
mod panic;

pub use attempt::StopReason;
pub use builder::{WorkerBuilder, DEFAULT_CONCURRENCY, DEFAULT_LEASE};
pub use export::describe_metrics;
pub use handler::{Handler, Job, JobError};
pub use history::HISTORY_FLUSH;
pub use metrics::MetricsSnapshot;
pub use periodic::{Missed, Periodic, Recurrence, MAX_PERIODIC_NAME_BYTES, PERIODIC_KEY_PREFIX};
pub use poll::{PollPolicy, DEFAULT_RELAXED_POLL, FAILED_CLAIM_RETRY_CAP};
pub use settings::{
    DEFAULT_CLAIMS_IN_FLIGHT, WIDE_CLAIMS_IN_FLIGHT, WIDE_FROM, WIDE_PREFETCH_BATCHES,
    WIDE_PREFETCH_MAX,
};
pub use standing::Role;
pub use task::{RunTask, TaskHandler};
pub use tenure_core::DEFAULT_LEADER_NAME;
pub use tokio_util::sync::CancellationToken;
pub use worker::{ShutdownReport, Worker};
