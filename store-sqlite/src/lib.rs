//! SQLite Tenure store: `BEGIN IMMEDIATE` claims on an embedded database file.
//!
//! [`SqliteStore`] keeps every guarantee of [`tenure_core::Store`] in one SQLite file,
//! with SQLite compiled in (no system library, no server). Open it with a
//! [`SqliteConfig`]:
//!
//! ```
//! # async fn demo() -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//! use tenure_sqlite::{SqliteConfig, SqliteStore};
//!
//! # let dir = std::env::temp_dir().join(format!("tenure-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let store = SqliteStore::open(SqliteConfig::new(dir.join("work.db"))).await?;
//! let queue = QueueName::new("emails")?;
//! store.enqueue_one(NewItem::new(queue.clone(), b"hello".to_vec())).await?;
//! let me = OwnerId::new("worker-1")?;
//! if let Some(lease) = store.claim_one(queue, me, Duration::from_secs(30)).await? {
//!     store.complete_one(lease.token).await?;
//! }
//! # Ok(())
//! # }
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(demo()).unwrap();
//! ```
//!
//! # How calls reach SQLite: one writer thread per open
//!
//! SQLite has one write lock per file, and waiting for it is unfair: its busy handler
//! sleeps and retries, so a connection can lose the lock again and again. The raw
//! measurements in `shared/research/limits.md` (note 4) show it: with 16 connections and
//! `synchronous=FULL` one claim waited 3.5 s (p99), and per-item throughput was flat in
//! the number of connections, while running 100 finalizes in one transaction raised it
//! more than 20-fold.
//!
//! So each [`SqliteStore::open`] starts **one dedicated writer thread** owning **one
//! connection**, and every call of that handle and its clones is queued to it (reads
//! too: a read is a few microseconds in process, and one connection keeps them
//! consistent with the writes). The thread drains the queue and runs whatever it found
//! (up to [`SqliteConfig::max_batch_jobs`]) in one `BEGIN IMMEDIATE` transaction, each
//! call in its own savepoint, and answers each caller after the one commit. So:
//!
//! - the async runtime never waits for a lock: a call is a channel send and a oneshot
//!   await, and the store needs no particular runtime. The hot calls (claim,
//!   complete, renew, release, fail) take a shortcut: when no other call holds the
//!   connection (or it comes free within 200 µs, the length of another inline call),
//!   the call runs on the caller's thread, in a transaction of its own, with SQLite's
//!   busy handler off; otherwise, or if a peer holds the write lock, it goes to the
//!   writer thread, which waits for it. The shortcut removes the hop to the
//!   writer thread and back (two thread wake-ups), which measured as most of a
//!   one-item call's time; it blocks the caller's thread only for the call's own SQL
//!   (tens of microseconds for a claim or a complete of one item);
//! - the calls of one process never contend for the write lock, so there is no busy
//!   waiting and no unfair tail inside a process;
//! - concurrent claims, renewals and finalizes of many workers share commits (and
//!   fsyncs), which is the batching the contract allows: each still gets its own
//!   answer, and a failing call rolls back only its own savepoint.
//!
//! The alternative, a connection per worker on blocking threads, keeps the lock fight
//! inside the process. Measured with the `sqlite` bench (`cargo bench -p
//! tenure-benches --bench sqlite`, group `sqlite_contention_full`): 16 claimers, one
//! item per claim, each claim and each complete its own call, `synchronous=FULL`, on
//! the shared 2-core machine:
//!
//! | | items/s | claim p50 | claim p99 | slowest claim |
//! |---|---|---|---|---|
//! | 16 tasks on one store (this design) | 7,124 | 1.0 ms | 2.6 ms | 21 ms |
//! | 16 threads, a connection each (raw rusqlite, same statements) | 927 | 0.25 ms | 1.6 ms | 331 ms |
//!
//! The writer thread turns 16 contending committers into batches that share one fsync
//! (7.7 times the throughput) and bounds the tail, where the raw connections leave a
//! claim waiting a third of a second on SQLite's sleeping busy handler (an earlier run
//! of the same group: 7,633 against 440 items/s, slowest claim 66 ms against 1.6 s).
//! With `synchronous=NORMAL` and one item per claim, 4 workers on the store made 11.9k
//! items/s against 10.6k for four raw connections; with one worker, where there is
//! nothing to batch, the hop to the writer thread and back costs about half the raw
//! loop's throughput (6.2k against 13.3k items/s). Most of that hop was two context
//! switches per call (a profile shows futex wait and wake-up dominating), so the writer
//! lingers up to 100 µs, yielding its core, for the next call before it sleeps: in
//! alternating runs of the same cells that took one worker at one item per claim from
//! 2.5k to 5.6k and 3.3k to 7.0k items/s, and one worker at 100 per claim from 51k to
//! 81k and 69k to 100k items/s. At 100 items per claim the store
//! runs at about half the raw loop (79k against 143k items/s with one worker): its
//! items carry six partial indexes (ready, running scope, expiry, stream, done, and
//! since version 4 the listing index) and a unique id, where the raw table has one
//! index.
//!
//! Those figures predate the inline path of the hot calls (above). Counted with
//! callgrind on one worker (`benches/examples/drain.rs`), a claimed and completed item
//! now costs 126k instructions at one item per claim against 111k for the raw loop
//! (223k before the inline path, prepared transaction statements, per-row writes and
//! the v3 state check; 141k with version 4's listing index over running rows), and
//! 47k against 21k at 100 per claim (88k before; 58k with version 4's index, 50k
//! before the claim wrote its rows a chunk per statement). What is left is the
//! indexes: each claimed row leaves the ready and listing indexes and enters the
//! expiry index, each completed one leaves the id and expiry indexes. At one item
//! per claim that is also where the time goes outside the instruction count: a
//! transaction writes one log frame per page it changed, about 7 pages per item
//! against 3 for the raw table (`strace -c`: 14.7 against 6.3 `pwrite` calls per
//! item), and those writes, not the instructions, are most of the gap there.
//!
//! Peers, meaning other processes or a second `open` of the same path, each have their
//! own writer and meet at SQLite's lock: a transaction waits up to
//! [`SqliteConfig::busy_timeout`] for it, is retried up to
//! [`SqliteConfig::busy_retries`] times, then the call answers
//! [`Error::Unavailable`] (retryable). Cross-process exclusivity is SQLite's: every
//! claim runs under `BEGIN IMMEDIATE`, so two claimers never see the same ready row.
//!
//! A call whose future is dropped before the writer reaches it is skipped, so a
//! cancelled claim leases nothing. Once running, it completes.
//!
//! # Schema
//!
//! Created or migrated when the store opens, in one transaction, with the version in
//! the `tenure_meta` table (`PRAGMA user_version` is left to the application). Every
//! table is prefixed `tenure_`, so the store can share a file with application tables.
//! A file with a newer schema version answers [`Error::Conflict`], a file that is not a
//! database or a path that cannot be opened for writing answers
//! [`Error::InvalidInput`] naming `path`; in each case nothing is written.
//!
//! - G9 (stream FIFO): a `head` flag, maintained in the write path (set at enqueue,
//!   moved on when a head completes or is discarded), so the claim reads only heads
//!   through one partial index. A complete of a streamed item first looks for an
//!   unfinished item ahead of it in its stream (by `tenure_items_stream`; the ones
//!   this call completed already are finished) and answers `OutOfOrder` if there is
//!   one.
//! - G10 (scope): a partial unique index over running rows' scope,
//!   `ON tenure_items(scope) WHERE state = 'running'`: two running items of one scope
//!   cannot exist whatever a claim does; the claim also passes over busy scopes,
//!   including between the items of one batch.
//! - G8 (order): the ready index `(queue, priority, run_at, seq) WHERE state = 'ready'
//!   AND head = 1`, walked one priority level at a time so scheduled items are never
//!   stepped over.
//! - G11 (dedup): keys live in `tenure_dedup` with their expiry, purged by
//!   [`Store::purge`].
//! - G14 (partitioned claiming, declared): schema version 2 adds `phash`, the item's
//!   [`key_hash`](tenure_core::partition::key_hash) computed in Rust at enqueue, and
//!   `tenure_stream_pins (stream PRIMARY KEY, instance)`. See
//!   [Partitioned claiming](#partitioned-claiming-g14).
//! - G16, G17 (queue limits, declared; schema version 7): every count is read inside
//!   the claim's `BEGIN IMMEDIATE` transaction. A queue's or limit key's running count
//!   is `count(*)` of its running rows through `tenure_items_running_limit (queue,
//!   limit_key) WHERE state = 'running'`, never a counter: a slot is a lease, and only
//!   the row's own fenced finalize, recovery or eviction gives it back. Rates keep the
//!   starts of their last period in `tenure_limit_starts`, deferrals live in
//!   `tenure_limit_defers`. A saturated key's candidates are passed over as busy scopes
//!   are; after 64 of them the claim leaves the walk of the ready index for the key walk
//!   (schema version 9): the heads of each open key, read from `tenure_items_ready_key
//!   (queue, limit_key, priority, run_at, seq)` and merged in claim order, stepping
//!   from key to key with one seek, so a saturated key's backlog costs a seek, not a
//!   scan. That index holds only items of queues with limits (`lq`), so other queues
//!   pay nothing. Fair queues and partitioned claims keep their walks.
//! - G18 (fair shares, declared; schema version 8): each item's start tag (`ftag`) is
//!   fixed at enqueue from `tenure_fair` and `tenure_fair_queues`; a fair queue's claim
//!   walks `tenure_items_ready_fair (queue, priority, ftag, run_at, seq)`, a partial
//!   index holding only tagged rows, so other queues pay nothing. A partitioned claim
//!   (G14) of a fair queue walks the ordinary ready index, in G8 order.
//! - Progress (schema version 10): `progress` holds the last progress a holder reported
//!   with an accepted renewal ([`Progress::encode`](tenure_core::Progress::encode)),
//!   written by the renewal's own fenced lookup in its transaction, only when a
//!   renewal reports some. A cancel that stops a running item fails it permanently in
//!   the cancel's write transaction, through the same path as `fail`.
//! - Time is stored as INTEGER microseconds from the store's [`Clock`](tenure_core::Clock);
//!   SQLite's own time functions are never used.
//!
//! # Partitioned claiming (G14)
//!
//! A claim with [`ClaimParams::partitioning`](tenure_core::ClaimParams::partitioning)
//! first ranks its owner: one read of `tenure_instances` counts the registered ids and
//! those below the owner's (SQLite's default BINARY collation is byte order). An owner
//! that is not registered answers [`Error::NotFound`] (`instance`) before anything,
//! expired-lease recovery included, is written. The claim then walks the same ready
//! index as an ordinary claim with one more filter per candidate head:
//!
//! ```sql
//! coalesce((SELECT p.instance = :owner FROM tenure_stream_pins p
//!           WHERE p.stream = tenure_items.stream),
//!          (phash % :partitions) % :live = :rank)
//! ```
//!
//! so a head pinned to the owner is taken whatever its partition, a head pinned to
//! another instance never, and an unpinned one (no stream, or no pin) by partition.
//! Every claimed head of an unpinned stream is pinned to the owner in the same
//! transaction (`INSERT .. ON CONFLICT DO NOTHING`). The filter cannot use an index
//! (the share depends on `live`), so the walk also reads the heads it passes over
//! (about `(live - 1) / live` of those it walks) with a primary-key probe each;
//! ordinary claims run the unchanged statements and never read the pins.
//!
//! Pins are dropped with their instance by [`Store::instance_evict_stale`] and
//! [`Store::instance_deregister`], in the same transaction that releases its leases.
//! [`Store::purge`] also drops, up to its `limit`, the pins of streams that have no
//! unfinished item left (and any pin of an instance no longer registered), so the
//! table does not grow with every stream key ever seen; a later item of such a stream
//! goes by its partition again. That pass probes every pin (two index lookups each),
//! so a purge costs time in the number of pinned streams; finalizes never touch pins.
//!
//! Migrating a version 1 file back-fills `phash` of every existing row in Rust, in the
//! migration transaction (one pass by rowid). A process still running a version 1
//! build on the same file would keep inserting rows with `phash = 0` (the column's
//! default) until it reopens and is refused as too old: such rows are never lost, they
//! all fall to partition 0 (rank 0). Stop old writers before the upgrade.
//!
//! # The file going away
//!
//! Before each batch the writer checks that the file at the path is still the one it
//! opened. If it was deleted or replaced, the connection is dropped and reopened
//! (without creating a file); until that works calls answer [`Error::Unavailable`], and
//! the store recovers by itself once the file is back. A file that is back without
//! the store's schema is refused (next section).
//!
//! # Damaged and emptied files
//!
//! - A damaged file (`SQLITE_CORRUPT`, or an open file that no longer reads as a
//!   database) answers [`Error::Corrupt`], not
//!   retryable, naming the file, what SQLite said and the first problems `PRAGMA
//!   quick_check` finds. Retrying cannot help; restore the file from a backup.
//! - An open store whose file was emptied or replaced by one without the store's
//!   schema answers [`Error::Corrupt`] on its next call
//!   and writes nothing: the file held the store when it was opened, so a fresh
//!   store in its place would silently forget every item.
//! - [`SqliteStore::open`] of a zero-byte file beside a non-empty `-wal` log answers
//!   [`Error::Corrupt`] and writes nothing: the log holds
//!   pages of a database that lost its contents.
//! - [`SqliteStore::open`] of a zero-byte file alone creates a fresh store in it:
//!   nothing tells such a file from one just made empty on purpose (`touch`, a
//!   temporary file). Keep backups of a file whose items matter.
//!
//! # Inside the application's transaction
//!
//! Four operations run inside the application's own transaction, on its own
//! connection ([`SqliteStore::connection`] opens one to the same file), named after
//! the [`Store`] call they mirror with `_in_tx`:
//!
//! | call | what commits with the application's rows |
//! |---|---|
//! | [`SqliteStore::enqueue_in_tx`] | new items (the transactional outbox) |
//! | [`SqliteStore::complete_in_tx`] | the fenced completion of a leased item |
//! | [`SqliteStore::fail_in_tx`] | its fenced failure (retry or dead) |
//! | [`SqliteStore::release_in_tx`] | its fenced release |
//!
//! Each runs the same statements as the store's own call, fenced on `(id, attempt, lease)`
//! and answered per token before the caller commits; each runs in a savepoint, so a
//! failing call leaves the caller's transaction as it was.
//!
//! The pattern, for a worker whose work is a write to the application's tables (seed
//! 003's ownership-verified finalize): `BEGIN IMMEDIATE`, the business write,
//! [`complete_in_tx`](SqliteStore::complete_in_tx) with the attempt's token, then
//! commit if it answered [`TokenOutcome::Accepted`] and roll back if it answered
//! [`TokenOutcome::LeaseLost`]. There is then one commit, not two: a crash before it
//! leaves neither the business row nor the completion, and a worker whose lease is
//! gone writes no business row. A rolled-back transaction leaves the item running
//! under the attempt's lease: the same worker may retry with the same token while the
//! lease lasts, or the lease expires and recovery hands the item out again (the next
//! attempt, one stall counted; G2, G6). The answer holds until the commit because the
//! transaction holds SQLite's write lock from the fenced write on. That lock also
//! makes every other write to the file wait (the store's claims and renewals, in this
//! process and in others), so commit promptly after the fenced call.
//!
//! Under the worker runtime, a handler takes the finalize over with
//! `tenure_runtime::Job::take_finalize`, so the runtime
//! does not complete that attempt a second time; the `outbox` example shows it.
//!
//! # Layout of this crate
//!
//! Every store crate has the same shape, so reading one means reading all:
//!
//! - `lib.rs`: the crate docs and the public exports, no logic;
//! - `config.rs`: what configures the store;
//! - `error.rs`: the backend's errors mapped into [`tenure_core::Error`];
//! - `store/`: the contract. `store/mod.rs` holds the store type and its
//!   [`Base`](tenure_core::contract::Base) impl (name, capabilities, limits, wake
//!   signal); each group of [`tenure_core::contract`] is implemented in a file of its
//!   own: `store/claim.rs` ([`Claims`](tenure_core::contract::Claims): enqueue and
//!   claim), `store/finalize.rs` (renew, complete, fail, release), `store/recovery.rs`
//!   (expired leases, purge), `store/instances.rs` (instances and leader),
//!   `store/inspect.rs` (dead items, reads, listings, cancel, pause) and
//!   `store/limits.rs` (queue limits). Core's [`Store`] validates
//!   every params struct before these see it;
//! - the schema or scripts, in files of their own;
//! - `tx.rs`, where the store runs inside the application's own transaction.
//!
//! Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs and the exports, no logic |
//! | `config.rs` | [`SqliteConfig`]: the store's options |
//! | `error.rs` | rusqlite's errors mapped into [`tenure_core::Error`] |
//! | `store/mod.rs` | [`SqliteStore`]: the struct, its own calls (open, close, connection, ...), and its `Base` impl |
//! | `store/claim.rs`, `store/finalize.rs`, `store/recovery.rs`, `store/instances.rs`, `store/inspect.rs` | one impl per contract group (`Claims`, `Finalize`, `Recovery`, `Instances`, `Inspect`): each method runs its SQL on the writer's connection |
//! | `ops/mod.rs` | what every operation shares: the call context, the statements of the hot paths (pinned to their indexes, with the test of their plans in `ops/tests.rs`), and reading and writing item rows |
//! | `ops/claim.rs`, `ops/finalize.rs`, `ops/recovery.rs`, `ops/instances.rs`, `ops/inspect.rs` | every operation as SQL on one connection, by the same groups |
//! | `store/limits.rs`, `ops/limits.rs` | queue limits (G16, G17): the `limits_*` bodies, and the gate a claim passes each candidate through |
//! | `schema/` | the schema: its version, [`schema_script`], and opening a connection onto it (`mod.rs`); each migration and its SQL (`versions.rs`) |
//! | `tx.rs` | the calls inside the application's transaction (`_in_tx`) |
//! | `writer.rs` | the writer thread each open store feeds |
#![deny(missing_docs)]

mod config;
mod error;
mod ops;
mod schema;
mod store;
mod tx;
mod writer;

// The crate docs name these.
#[cfg(doc)]
use tenure_core::{Error, Store, TokenOutcome};

pub use config::{
    SqliteConfig, Synchronous, DEFAULT_BUSY_RETRIES, DEFAULT_BUSY_TIMEOUT, URL_SCHEMES,
};
pub use schema::{schema_script, SCHEMA_VERSION};
pub use store::SqliteStore;
