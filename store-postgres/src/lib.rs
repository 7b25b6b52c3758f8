//! PostgreSQL Tenure store: `FOR UPDATE SKIP LOCKED` claims over a partial index of
//! ready rows, fenced batched finalizes, and a partial unique index per scope.
//!
//! ```no_run
//! # async fn demo() -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//! use tenure_postgres::{PgConfig, PgStore};
//!
//! let store = PgStore::connect(PgConfig::new("postgres://app@db/app")).await?;
//! let queue = QueueName::new("emails")?;
//! store.enqueue_one(NewItem::new(queue.clone(), b"hello".to_vec())).await?;
//! if let Some(lease) = store
//!     .claim_one(queue, OwnerId::new("worker-1")?, Duration::from_secs(30))
//!     .await?
//! {
//!     store.complete_one(lease.token).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How the contract is encoded
//!
//! One hot table, `<schema>.items`, with times as `BIGINT` microseconds bound from the
//! store's [`Clock`](tenure_core::Clock) (no statement calls `now()`):
//!
//! - **Claim** (G1, G7, G8) is one statement: a `FOR UPDATE SKIP LOCKED` scan of the
//!   partial index `items_claim (queue, priority, run_at, seq) WHERE state = 'ready'
//!   AND head`, fenced from its `UPDATE` by `id = ANY(ARRAY(...))`. No other index has
//!   that order, so the plan cannot flip to a walk over finished rows; a test reads
//!   `EXPLAIN` after most rows have finished and asserts the index. Before picking,
//!   the statement checks for expired leases of the claimed queues; when there are
//!   some, the store recovers them first (G2, G6) and runs the claim again.
//! - **Stream FIFO** (G9) is a `head` flag kept in the write path: an enqueue locks
//!   its stream's row in `<schema>.streams` and marks the item head only when the
//!   row's `pending` says the stream had no unfinished item (0; otherwise at least
//!   their number). A complete, discard or cancel of a head promotes the stream's
//!   next waiting item in the same transaction, in statements of their own
//!   (`tenure_promote`, migration 5), without touching the stream's row; only a
//!   finish that finds no waiting item locks the row (so every enqueue that held it
//!   has committed), looks again in a fresh snapshot under READ COMMITTED and, with
//!   still nothing waiting, sets `pending` to 0. A complete of an item behind its head
//!   (the rest of a stream run) is refused as out of order unless the same call
//!   completes every unfinished item ahead of it first (migration 6: the head is
//!   looked for among the call's tokens, the items between by their index), so a
//!   stream's items complete in enqueue order and never mark a second head; a
//!   refused token that is still current answers `OutOfOrder` (read only when some
//!   token was refused). Retries, releases and expired
//!   leases leave the head where it is, so a waiting, running or dead head blocks its
//!   stream.
//! - **Scope exclusivity** (G10) is the partial unique index `items_scope_running
//!   (scope) WHERE state = 'running'`. The claim passes over a scope with a running
//!   item (and takes only the first eligible item of each scope per batch); a
//!   claimer that loses a race to the index gets a unique violation on that index,
//!   which the store answers by picking again, so the call takes other items and
//!   does not fail.
//! - **Finalize** (G3, G4, G5): `complete`, `fail`, `release` and `renew` are each one
//!   statement over the whole batch, joined to `unnest($ids, $attempts, $leases)` and
//!   fenced on `(id, attempt, lease)` and `state = 'running'`; tokens not returned
//!   answer lease lost. The lease id (migration 6) is minted by each claim, so a claim
//!   a promoted standby never received leaves its token refused.
//!   Finished rows are deleted unless [`PgConfig::keep_done`] is set. `complete`
//!   calls the function `tenure_complete` (migration 6): it finishes the rows and
//!   promotes the next items of the streams whose heads it finished, in statements
//!   of their own, all in one round trip.
//! - **Dedup keys** (G11) live in `<schema>.dedup_keys` with their own expiry, purged
//!   by [`purge`](tenure_core::Store::purge).
//! - **Partitioned claiming** (G14, declared in
//!   [`capabilities`](tenure_core::Store::capabilities); migration 3) adds two
//!   columns. `items.phash` is [`key_hash`](tenure_core::partition::key_hash),
//!   computed in Rust at enqueue; rows older than the migration (or written by older
//!   code during a rolling deploy) keep NULL and the claim computes theirs with the
//!   SQL function `tenure_key_hash`, which a test holds equal to Rust's, so nothing
//!   is back-filled under the migration's lock. `streams.pinned_to` is a stream's
//!   pin, on the row that exists while the stream has unfinished items (a purge that
//!   drops the row drops the pin; no second table to keep in step), found by the
//!   partial index `streams_pinned` when eviction and deregistration clear an
//!   instance's pins. The partitioned claim is the ordinary one plus, in the same
//!   statement: one read of `instances` (is the owner registered, its rank by id
//!   under `COLLATE "C"`, the live count), the share filter on the same
//!   `items_claim` scan (pinned to the owner, or unpinned and `(phash % partitions)
//!   % live = rank`, the pin read by the stream's primary key), and an `UPDATE` that
//!   pins the claimed items' unpinned streams. A pin to an instance no longer
//!   registered counts as none and is replaced, so a pin committed by a claim that
//!   raced its owner's eviction cannot strand a stream. An unregistered owner picks
//!   nothing and is answered [`Error::NotFound`](tenure_core::Error) before any
//!   recovery runs. The ordinary claim's statement is untouched.
//! - **Instances and leader leases** (G12, G13) are rows; the leader lease is an
//!   upsert that succeeds when the lease is free, expired or already ours, raising
//!   the term on every change of holder.
//!
//! # Inside the application's transaction
//!
//! Four calls take the application's own connection or transaction (`&mut tx` for a
//! `sqlx::Transaction<'_, Postgres>`, or a `&mut PgConnection`), named after the
//! [`Store`](tenure_core::Store) call they mirror with `_in_tx`:
//!
//! | call | what commits with the application's rows |
//! |---|---|
//! | [`PgStore::enqueue_in_tx`] | new items (the transactional outbox) |
//! | [`PgStore::complete_in_tx`] | the fenced completion of a leased item |
//! | [`PgStore::fail_in_tx`] | its fenced failure (retry or dead) |
//! | [`PgStore::release_in_tx`] | its fenced release |
//!
//! Each runs the same statement as the store's own call, fenced on `(id, attempt, lease)`
//! and answered per token before the caller commits, in a savepoint, so a failing
//! call leaves the caller's transaction usable. (`enqueue_with`, the former name of
//! `enqueue_in_tx`, still works and is deprecated.)
//!
//! The pattern, for a worker whose work is a write to the application's tables (seed
//! 003's ownership-verified finalize): begin, the business write,
//! [`complete_in_tx`](PgStore::complete_in_tx) with the attempt's token, then commit
//! if it answered `Accepted` and roll back if it answered `LeaseLost`. There is then
//! one commit, not two: a crash before it leaves neither the business row nor the
//! completion, and a worker whose lease is gone writes no business row. A rolled-back
//! transaction leaves the item running under the attempt's lease: the same worker may
//! retry with the same token while the lease lasts, or the lease expires and recovery
//! hands the item out again (the next attempt, one stall counted; G2, G6). The answer
//! holds until the commit because the finished rows stay row-locked until then, and
//! recovery and claims pass over locked rows (`SKIP LOCKED`). Keep such transactions
//! short: a renewal of a finished lease waits for the commit (with the other leases of
//! its batch), and for the last unfinished item of a stream they also hold the
//! stream's row, so an enqueue to that stream waits for the commit.
//!
//! Under the worker runtime, a handler takes the finalize over with
//! `tenure_runtime::Job::take_finalize`, so the runtime
//! does not complete that attempt a second time.
//!
//! # Migrations
//!
//! Migrations are embedded in the crate. [`PgStore::connect`] applies missing ones
//! unless [`PgConfig::migrate_on_connect`] is `false`; [`PgStore::migrate`] applies
//! them on demand. They run in one transaction under a transaction-scoped advisory
//! lock, so several processes may start at once. An index a migration adds to the
//! items table of an existing schema is built before it with `CREATE INDEX
//! CONCURRENTLY`, outside the transaction, so claims and finalizes go on while it
//! builds (a test migrates a table of 1,000,000 rows under a claim loop); an INVALID
//! index left by an interrupted build is dropped and built again, and a build in
//! progress in another session is waited for. Applied versions are recorded in
//! `<schema>.tenure_migrations`, our own table, so an application's own sqlx
//! migrations (`_sqlx_migrations`) never clash with ours. The schema name (default
//! `tenure`) is validated before anything runs.
//!
//! In production, run migrations from a deploy step with a role that may create the
//! schema, and connect the workers with `migrate_on_connect(false)` and a role that
//! only reads and writes rows.
//!
//! Rolling deploys across migration 9 are handled in one direction: processes of the
//! previous version go on claiming and finishing while it runs and after it (a test
//! runs a version-8 claimer throughout the migration of a live table, with this
//! version's `Worker` joining once it has committed; nothing is lost, finished twice
//! or finished unfenced). Their claims ignore the cursors and their writes lower them
//! through the triggers. The migration holds a `SHARE ROW EXCLUSIVE` lock on `items`
//! for the milliseconds it takes (no row is rewritten or scanned), so writes wait that
//! long. This version started against a schema not yet migrated refuses: its calls
//! answer `Error::Config` ("not migrated to this version; run migrate"), so migrate
//! first, then roll the new processes out.
//!
//! # Required privileges
//!
//! - To migrate: `CREATE` on the database (to create the schema), or an existing
//!   schema owned by the migrating role.
//! - To run: `USAGE` on the schema and `SELECT, INSERT, UPDATE, DELETE` on its
//!   tables. The function `tenure_complete` runs with the caller's rights and is
//!   executable by everyone unless that default was revoked (then grant `EXECUTE`).
//!   LISTEN/NOTIFY need no privilege. For example (a test connects with exactly
//!   these grants and runs every operation):
//!
//! ```sql
//! GRANT USAGE ON SCHEMA tenure TO worker;
//! GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA tenure TO worker;
//! ```
//!
//! `ALL TABLES` covers the tables that exist when it runs: after a migration that adds
//! one (migration 9 adds `claim_cursors`, which every claim and enqueue writes), run
//! it again, or set `ALTER DEFAULT PRIVILEGES` for the migrating role.
//!
//! # Behind a transaction-pooling proxy (PgBouncer and the like)
//!
//! Claim, renew, complete, fail and release use no session state: no `SET`, no
//! session advisory locks, no temporary tables; each is one statement or one short
//! transaction. Behind a proxy in transaction mode, set
//! [`PgConfig::statement_cache`] to `false` and [`PgConfig::listen`] to `false`:
//!
//! - statements are then unnamed and parsed on every call, and each call runs in a
//!   short transaction of its own, so the proxy keeps one server connection from a
//!   statement's parse to its execution (a bare unnamed statement is parsed and
//!   executed in two round trips, between which a proxy may switch servers);
//! - no startup options are sent (with caching on, the store asks for
//!   `plan_cache_mode=force_generic_plan` and `jit=off` as startup options, which PgBouncer
//!   refuses unless told to ignore it);
//! - LISTEN needs a session of its own, so workers poll instead.
//!
//! The whole conformance suite passes this way through PgBouncer 1.18 in
//! `pool_mode = transaction` (run it with `TENURE_POSTGRES_PROXY=1` and
//! `TENURE_POSTGRES_URL` pointing at the proxy). Migrations take a
//! transaction-scoped advisory lock and use unnamed statements, which is also safe
//! there.
//!
//! # Pool size versus worker count
//!
//! A call holds a connection only while its statement runs, never while a handler
//! works, so a pool far smaller than the number of handler slots suffices: one
//! connection per concurrent claim/renew/finalize in flight. A worker runtime issues
//! at most a claim, a renewal batch and a finalize batch at once, so 4 to 10
//! connections per process serve hundreds of handlers. Keep the sum over all
//! processes (plus one listening connection each, when [`PgConfig::listen`] is on)
//! below the server's `max_connections`. Give the pool one connection more than the
//! calls you expect at once: sqlx checks each connection with a round trip when it
//! goes back to the pool, and a call that needs that very connection waits for the
//! check (about 12 % per item at one worker and B = 1 on the development machine).
//! When the pool is exhausted a call waits up
//! to [`PgConfig::acquire_timeout`] and then answers
//! [`Error::Unavailable`](tenure_core::Error), as it does while the server is down.
//!
//! # Performance
//!
//! `cargo bench -p tenure-benches --bench postgres` drains N ready items with W
//! workers claiming B at a time and completing each batch in one call, beside a raw
//! sqlx loop issuing the same `SKIP LOCKED` claim and fenced delete on dedicated
//! connections, in the same run, so the store's overhead reads as a ratio; the
//! `postgres_streams` group drains 100,000 items over 1,000 streams beside a raw
//! head-marker loop. Figures from one run of every cell on every store are on the
//! benchmarks page of the repository (`docs/benchmarks.md`), which
//! `cargo run --release -p tenure-benches --example bench_page` writes.
//!
//! # Under an old snapshot (migration 9)
//!
//! While any session of the database holds an old snapshot (a report, `pg_dump`, a
//! `BEGIN` left open, a standby with `hot_standby_feedback`), vacuum can remove no
//! row version that died after it, nor mark its index entries dead. Every claim
//! leaves a dead version of a ready row, and every finish one of a running row, so
//! a plain scan from the front of `items_claim` walks one entry per item claimed
//! since the snapshot, and a claim slows with every item finished (0.19 of its free
//! speed on a 200,000-item drain before migration 9). Three changes keep those
//! entries out of the hot path:
//!
//! - **Claim cursors.** `<schema>.claim_cursors` holds, per queue, a claim key
//!   `(priority, run_at, seq)` that no committed ready head of the queue is below; a
//!   claim's scan starts there (a row comparison in the index condition), so it never
//!   visits the entries of the items claimed before it. Triggers on `items` lower a
//!   cursor when a write makes a ready head below it (an enqueue, a promote, a retry,
//!   a release, a recovery, a requeue, from this code or older code alike), after
//!   taking the queue's cursor lock (`pg_advisory_xact_lock_shared`, transaction
//!   scoped). `tenure_cursor_advance` moves a cursor forward to the first visible ready
//!   head only while it holds that lock exclusively, which it tries and never waits
//!   for: no write is then between its row and its commit, so nothing it cannot see
//!   can land below the new position, and a write that comes later lowers it again.
//!   G8 order is therefore exact, whatever the clocks. The store calls the advance
//!   before a claim once it has claimed 1,000 items or a second has passed, in a
//!   transaction of its own; between two advances a claim walks at most the entries
//!   of the items claimed meanwhile. A transaction that enqueues and stays open holds
//!   its queue's cursor where it is (claims stay correct and walk a little more).
//! - **The expired-lease check** before a claim starts at the cursor's
//!   `lease_floor`: the earliest expiry of the queue's visible running items at the
//!   last advance, and never later than the store's clock minus one second. A claim
//!   writes `now + lease_for`, so as long as the processes' clocks agree within that
//!   second no running item expires before the floor; `recover` itself (and the
//!   worker's maintenance) still scans every expired lease.
//! - **Finalizes by primary key.** `complete` (inside `tenure_complete`), `fail`,
//!   `release` and `renew` compare the row's state with `(SELECT 'running'::text)`
//!   rather than the literal, so the planner cannot prove the partial index
//!   `items_running` from it; a generic plan that estimated few running rows had
//!   chosen to scan that whole index for the batch's ids, one entry per item
//!   finished since the snapshot.
//!
//! The dead versions themselves still accumulate until the snapshot ends (vacuum
//! removes them then); they are no longer in any claim's or finalize's path. The
//! figures (`tenure bench --hold-snapshot`) are on the benchmarks page.
//!
//! # Faults
//!
//! Connection loss, server shutdown (`57P01`, ...), serialization failures and
//! deadlocks answer [`Error::Unavailable`](tenure_core::Error) (retryable); the pool
//! replaces broken connections, so the same store works again once the server is
//! back. A restart or failover leaves every pooled connection dead: once a lost
//! session has been seen, a connection idle since before it is tested before it is
//! handed out (one round trip per connection per loss; none on the hot path
//! otherwise) and a dead one replaced, so only the call that met the loss fails, not
//! one call per pooled connection. The store follows a failover through the address
//! it was given: point it at an address that moves to the new primary (a virtual IP,
//! a DNS name, a proxy). A running worker completes again within a fraction of a
//! second of a restarted server being ready (`tests/failover.rs` prints the figure;
//! 0 to 0.22 s on the development machine, 14 to 17 s before the pool and the
//! runtime's retry were changed). Every finalize is fenced, so retrying a call whose outcome was unknown can
//! never finalize an item twice. A refused connection says so ("connection refused")
//! within a fraction of a second instead of waiting out
//! [`PgConfig::acquire_timeout`]: when opening a connection takes longer than 250 ms,
//! the store opens one itself to learn why. A test kills the connection after the
//! server committed a complete and before the answer arrived: the worker runtime
//! retries, is refused as stale, and counts the item completed (or, when finished
//! items are deleted, `unconfirmed`), never a lost lease; the item ran once.
//!
//! # Errors a caller can act on
//!
//! - [`Error::Unavailable`](tenure_core::Error::Unavailable): retry; the store heals
//!   by itself (the faults above).
//! - [`Error::Config`](tenure_core::Error::Config), not retryable: the server is
//!   reachable but the deployment is wrong, and every call answers the same until it
//!   is fixed. An unknown database (`3D000`), an unknown role or refused password
//!   (`28000`, `28P01`), a missing privilege (`42501`), a schema that is missing or
//!   not migrated to this version (`3F000`, `42P01`, `42883`; the message says "run
//!   migrate"), and a TLS certificate that is not trusted or does not name the host.
//! - [`Error::InvalidInput`](tenure_core::Error::InvalidInput), before anything runs:
//!   a schema that is not a safe identifier or is a PostgreSQL system schema
//!   (`information_schema`, `pg_*`), naming `schema`; a URL parameter sqlx does not
//!   understand (only [`DRIVER_PARAMETERS`] and `options[SETTING]` pass, their
//!   names percent-decoded first as sqlx decodes them), or a
//!   certificate file that does not exist, naming `url` and the parameter.
//! - [`Error::Internal`](tenure_core::Error::Internal) is left for bugs.
//!
//! # TLS
//!
//! TLS is built in (rustls, with the Mozilla root certificates), chosen with the
//! URL's `sslmode`, as in libpq:
//!
//! - `?sslmode=require`: encrypted, the server's certificate not checked.
//! - `?sslmode=verify-full&sslrootcert=/path/root.crt`: encrypted, the certificate
//!   must chain to the given root (or, without `sslrootcert`, to a public root) and
//!   name the host of the URL. `verify-ca` checks the chain only.
//! - `sslcert=` and `sslkey=` give a client certificate.
//! - The default, `prefer`, uses TLS when the server offers it.
//!
//! ```no_run
//! # async fn demo() -> tenure_core::Result<()> {
//! use tenure_postgres::{PgConfig, PgStore};
//! let url = "postgres://app@db.internal/app\
//!            ?sslmode=verify-full&sslrootcert=/etc/ssl/certs/db-root.pem";
//! let store = PgStore::connect(PgConfig::new(url)).await?;
//! # let _ = store; Ok(())
//! # }
//! ```
//!
//! The tests connect to the local server with `sslmode=require` and with
//! `verify-full` against its own certificate (`SHOW ssl_cert_file`) as the root, and
//! check `pg_stat_ssl`; `verify-full` to a name the certificate lacks answers
//! [`Error::Config`](tenure_core::Error::Config).
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
//!   `store/inspect.rs` (dead items, reads, listings, cancel, pause),
//!   `store/limits.rs` (queue limits, with their claim in `store/limited_claim.rs`
//!   and their statements in `sql/limits/`, loaded by `store/limits_sql.rs`). Core's
//!   [`Store`](tenure_core::Store) validates
//!   every params struct before these see it;
//! - the schema or scripts, in files of their own;
//! - `tx.rs`, where the store runs inside the application's own transaction.
//!
//! Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs and the exports, no logic |
//! | `config.rs` | [`PgConfig`]: the store's options |
//! | `connect.rs` | connection management, kept beside `config.rs`: the URL and schema checks run before anything, and the acquire that learns why a connection is slow |
//! | `error.rs` | sqlx's errors mapped into [`tenure_core::Error`] |
//! | `store/mod.rs` | [`PgStore`]: the struct, its pool and sessions, and its `Base` impl |
//! | `store/claim.rs` | enqueue and claim (the `Claims` impl), and the steps of a claim |
//! | `store/enqueue.rs` | the steps of an enqueue, shared with the `_in_tx` calls |
//! | `store/finalize.rs` | renew, complete, fail and release |
//! | `store/recovery.rs` | time and recovery: recovering expired leases, purge |
//! | `store/instances.rs` | instances and the leader lease |
//! | `store/inspect.rs` | inspection and control: item, counts, listings, cancel, pause, dead items |
//! | `store/limits.rs` | queue limits (the `Limiting` impl: set, get, clear, list, defer, wait) and which claims take the limited path |
//! | `store/limited_claim.rs` | the claim of queues with limits or fair shares (G16, G17, G18) |
//! | `store/fair.rs` | the fair-share tags of an enqueue (G18) |
//! | `store/limits_sql.rs`, `sql/limits/` | the statements of queue limits and fair shares, one file each |
//! | `sql.rs`, `sql/`, `schema.sql`, `migrate.rs`, `migrations/` | the schema: every statement (one file each in `sql/`), the current schema in one file, and the migrations that create the tables ([`schema_version`], [`migration_script`]) |
//! | `tx.rs` | the calls inside the application's transaction (`_in_tx`) |
//! | `rows.rs` | decoding rows into the model |
//! | `listen.rs` | the LISTEN/NOTIFY wake-ups |
//! | `notify.rs` | the NOTIFY sent after an enqueue commits |
//! | `tests/` | unit tests that need the private statements, one file per module |
#![deny(missing_docs)]

mod config;
mod connect;
mod error;
mod listen;
mod migrate;
mod notify;
mod rows;
mod sql;
mod store;
mod tx;

pub use config::{PgConfig, URL_SCHEMES};
pub use connect::{check_schema, DRIVER_PARAMETERS};
pub use migrate::{migration_script, schema_version};
pub use store::PgStore;

pub(crate) use error::STORE;

#[cfg(test)]
mod tests;
