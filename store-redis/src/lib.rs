//! Redis Tenure store: every transition one Lua function, so each is atomic on the
//! server; all keys of a prefix in one hash slot.
//!
//! ```no_run
//! # async fn demo() -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//! use tenure_redis::{RedisConfig, RedisStore};
//!
//! let store = RedisStore::connect(RedisConfig::new("redis://127.0.0.1:6379").prefix("jobs")).await?;
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
//! Every [`Store`](tenure_core::Store) operation is one Lua function (`src/scripts/`),
//! all of them in one Redis function library (Redis 7 or later) with the shared
//! `lib.lua` at its top, run with `FCALL`. Redis runs a function
//! alone, so every transition is atomic (G1): no other command sees half of a claim or
//! of a finalize. The store's [`Clock`](tenure_core::Clock) is read once per call and
//! passed into the script as microseconds; no script reads the server's `TIME`, so a
//! [`ManualClock`](tenure_core::ManualClock) drives expiry, schedules, dedup windows,
//! heartbeats and leader leases exactly as it does on the other stores.
//!
//! - **Items** are hashes. An item is in exactly the indexes its state puts it in,
//!   moved by the scripts in the write path; no script scans.
//! - **Claim** (G7, G8): each queue has a `ready` sorted set of *candidates*: ready,
//!   due, heading their stream, and (if scoped) first of their scope with the scope
//!   free. The score is the priority; the member is `run_at` and the enqueue sequence
//!   in fixed-width hex, then the id, so equal scores sort by run_at, then enqueue
//!   order. A claim of B items reads the first B members. Before picking, the claim
//!   recovers the queues' expired leases (G2, G6; `running` is a sorted set by lease
//!   expiry) and moves the scheduled candidates that have come due (a sorted set by
//!   `run_at`), each once.
//! - **Stream FIFO** (G9): a stream's unfinished items sit in a sorted set by enqueue
//!   sequence; only its first is ever a candidate. Completing or discarding the head
//!   places the next. A retried, running or dead head stays first, so it blocks the
//!   stream. A complete of an item that is not first (the rest of a stream run,
//!   before its head) answers `OutOfOrder` and changes nothing.
//! - **Scope exclusivity** (G10): a scope's due items wait per queue in a sorted set
//!   ordered like `ready`; only the first of each is in `ready`, and only while the
//!   scope's marker key (its running item) is absent. Claiming a scoped item sets the
//!   marker and takes the scope's entries out of `ready`; the end of that attempt
//!   (complete, fail, release, expiry, eviction) deletes it and puts them back.
//! - **Finalize** (G3, G4, G5): `complete`, `fail`, `release` and `renew` take a batch
//!   of tokens and answer per token; each is applied only when the item is `running`
//!   with that very `attempt`. The fence reads one field of the item, its state
//!   word: state, attempt, renewals, the last change, a mark telling whether the
//!   item has a stream, scope, dedup key or last error, and its queue, so a
//!   `complete` of an item without keys reads nothing else. Finished items are
//!   deleted unless
//!   [`RedisConfig::keep_done`] is set.
//! - **Dedup keys** (G11) are string keys holding the first item's id and the expiry
//!   on the store clock, which decides; each also has a key TTL of its window plus a
//!   day, so keys nobody purges are collected by Redis itself.
//!   [`purge`](tenure_core::Store::purge) deletes them by a sorted set of expiries.
//! - **Instances** (G12) are hashes with sorted sets by registration and by last
//!   heartbeat. Eviction and deregistration find the owner's leases in the queues'
//!   running sets (O(running items), no index per owner to keep on every claim and
//!   finalize) and release them in the same call. **Leader leases** (G13) are hashes holding the holder, the
//!   term and the expiry.
//! - **Partitioned claiming** (G14, declared in
//!   [`capabilities`](tenure_core::Store::capabilities)): each item keeps its
//!   [`key_hash`](tenure_core::partition::key_hash), computed in Rust at enqueue and
//!   stored as two 32-bit halves (Lua numbers are doubles), so the script computes the
//!   partition exactly. Instances are also kept in a sorted set scored 0, whose rank
//!   is the id's rank in byte order, and a stream's pin is a key naming its instance,
//!   with a set of pinned streams per instance so eviction and deregistration drop
//!   them at once; a stream with no unfinished item loses its pin. A partitioned
//!   claim refuses an unregistered owner before anything else
//!   ([`Error::NotFound`](tenure_core::Error)), then looks at every due candidate of
//!   its queues (the items waiting behind a free scope's first included) and takes the
//!   owner's share, so it costs O(n) in the due candidates where an ordinary claim
//!   costs O(B); the ordinary claim's script path is unchanged.
//! - **Queue limits** (G16 concurrency, G17 rate; declared in
//!   [`capabilities`](tenure_core::Store::capabilities) as `limits`): a queue's limits
//!   are a hash (with a hash each of per-key overrides and of weights), a set names
//!   the queues that have some, and an item's limit key is a field of its hash (`lk`).
//!   No running count is kept: the claim counts the queue's running set (a slot is a
//!   lease) and, per limit key, the members of that set naming the key, in the same
//!   function call as the claim, so only a lease leaving `running` (its own fenced
//!   finalize, expiry recovery, eviction) gives a slot back. A rate's starts are a
//!   sorted set per key by start time, trimmed to the period by the claim that reads
//!   them; a deferral is a hash of keys to instants. A queue with limits or a deferral
//!   leaves the claim's fast path for a walk of its `ready` set in claim order that
//!   passes saturated keys over. Costs: such a claim reads the queue's running set
//!   once per call when a per-key limit is set (O(running items)), and may walk past a
//!   saturated key's whole backlog (O(that backlog)). Fair shares (G18) are not served
//!   yet: an item naming a fairness key is refused
//!   ([`Error::Unsupported`](tenure_core::Error)), and weights are only stored.
//!
//! Scripts check everything before their first write (an enqueue whose id exists
//! answers [`Error::Conflict`](tenure_core::Error) having written nothing), because
//! Redis does not roll back a script that fails halfway.
//!
//! # Schema: the key layout, and Redis Cluster
//!
//! Every key is `{<prefix>}:<kind>:<name>` (the prefix defaults to `tenure`; set it
//! with [`RedisConfig::prefix`] or `?tenure_prefix=` in a `tenure::open` URL). The
//! braces are a hash tag: every key of one prefix hashes to **one slot**, each function
//! call declares the root key `{<prefix>}` and builds the others from it, so every
//! call's keys are in the slot it is routed by. One prefix is therefore one shard:
//! it never spans Cluster nodes and its throughput is one node's. To spread work over
//! a cluster, give independent workloads (tenants, queue families) prefixes of their
//! own; each is a separate store whose slot lands wherever the cluster puts it.
//! Stream, scope and dedup keys are per prefix.
//!
//! **Spreading queue families over a cluster.** Give each independent family of
//! queues (a tenant, a product area) a store of its own with its own prefix:
//!
//! ```no_run
//! # async fn demo() -> tenure_core::Result<()> {
//! use tenure_redis::{RedisConfig, RedisStore};
//!
//! let url = "redis+cluster://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379";
//! let emails = RedisStore::connect(RedisConfig::new(url).prefix("emails")).await?;
//! let billing = RedisStore::connect(RedisConfig::new(url).prefix("billing")).await?;
//! # let _ = (emails, billing);
//! # Ok(())
//! # }
//! ```
//!
//! Each prefix's slot is `CLUSTER KEYSLOT {<prefix>}`, so which primary serves it is
//! fixed by the name and the cluster's slot ranges; with a few families per primary
//! they spread (a test drains six families on a 3-primary cluster and checks they
//! landed on more than one). Families that must not share a primary can be given
//! names whose slots differ, or moved with `redis-cli --cluster reshard`. Items of
//! different prefixes never interact: a scope, a stream or a dedup key of one family
//! does not reach another.
//!
//! The layout has a version (`{<prefix>}:layout`, 6 in this version, `lib.lua`
//! describes each): the first operator call on a store written by an earlier layout
//! upgrades it in one call, and so does the first claim of a queue with limits, limit
//! keys or fair shares (layout 6 keeps each limit key's candidates in a set of its own
//! and each key's running items beside them; from 5 they are built from the claim and
//! running sets). Other claims and finalizes need no upgrade (an item's state
//! word as layout 3 wrote it, without mark and queue, is read as one that may have
//! keys). Stop every process of an earlier version before starting this one on the
//! same prefix: an earlier version neither reads nor keeps the fields of layouts 3
//! and 4 (a queue's due bound and pause flag beside it; ready items counted by their
//! index; the mark), and evicts only the leases in the owner sets layout 4 no longer
//! keeps.
//! An earlier version's claim does not read limits and keeps no key sets, so it must
//! be stopped before this one runs on a prefix.
//!
//! **Limits and fair shares (G16, G17, G18).** A due candidate with a limit key and no
//! scope waits in its key's sorted set (`kr`); the queue's candidates hold only the
//! first item of each key that is not parked. A claim that finds a key at a bound
//! parks it (`pk`, with the time a rate window or deferral may open it) and passes on;
//! a lease of the key leaving `running` (finish, expiry, eviction), a change of the
//! queue's limits or that time puts the key's first item back. So a claim reads about
//! one entry per item it takes and per key it parks, never a saturated key's backlog.
//! A key's running items are a set (`kl`) that the claim adds to and the step ending
//! the lease removes from, so a refused stale finish frees nothing. In a queue where an
//! item named a tenant, the item's start tag (fixed at enqueue from the tenant's finish
//! tag, `ft`, and the queue's virtual time, `fv`) leads its candidate entry, so the
//! candidates are in fair order and the claim takes the first as usual.
//!
//! The shard channel `{<prefix>}:wake` carries the wake-up hint: every enqueue that
//! inserts publishes on it once (`SPUBLISH`), and [`RedisConfig::listen`] (on by
//! default) subscribes (`SSUBSCRIBE`, on a RESP3 connection of its own), firing the
//! store's [`wake_signal`](tenure_core::Store::wake_signal) in every process. A shard
//! channel hashes like a key, so on a cluster the hint stays on the shard of the
//! prefix's slot (a plain `PUBLISH` is broadcast to every node); on one server and
//! behind Sentinel it behaves like any channel. Stores of versions that published
//! with `PUBLISH` do not hear this version's enqueues, and the other way round: mixed
//! versions fall back to polling. The
//! signal's [`WakeHealth`](tenure_core::WakeHealth) is `Down` until the subscription is
//! in place and whenever its connection is lost (the listener reconnects on its own),
//! `Healthy` otherwise, so workers relax their polling only while it works.
//!
//! # Durability
//!
//! Redis acknowledges a script once it has run in memory. What survives a restart
//! depends on the server's persistence, not on this crate:
//!
//! - **No persistence** (`--save "" --appendonly no`): a restart loses everything:
//!   items, leases, dedup keys, instances, leader terms. Only for work that can be
//!   enqueued again.
//! - **AOF `appendfsync everysec`**: a crash of the server or its machine loses up
//!   to about one second of acknowledged writes. A lost complete makes its item run
//!   again (at-least-once holds); a lost enqueue is gone, and a lost leader
//!   acquisition lets a term be issued twice, so do not rely on terms across a crash.
//!   A restart of the server process alone (no machine crash) loses nothing the
//!   kernel had accepted.
//! - **AOF `appendfsync always`**: each script's effects are written and fsynced
//!   before the reply, so nothing acknowledged is lost in a crash; a test kills and
//!   restarts such a server in the middle of a drain and checks that no item is lost
//!   or finalized twice. Expect a large cost per write on slow disks.
//!
//! Run the server with `maxmemory-policy noeviction` (Redis's default): a policy that
//! evicts keys would drop items, indexes or markers without a transition, and a
//! `volatile-*` policy would drop dedup keys (the only keys with a TTL) before their
//! window ends. With `noeviction` a full server refuses writes (`OOM`), which the
//! store answers as [`Error::Unavailable`](tenure_core::Error).
//!
//! Replication is asynchronous: on a failover the new primary may miss the last
//! writes. See the next section for what that means for fencing and for
//! [`RedisConfig::wait_replicas`].
//!
//! # High availability: Sentinel and Cluster
//!
//! [`RedisConfig::new`] takes three kinds of URL (the table there has the full
//! syntax):
//!
//! - `redis://host:6379/0`: one server. A failover behind it is not followed.
//! - `redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster`: the primary that the
//!   sentinels name for `mymaster`, through the driver's `SentinelClient` (it asks
//!   the sentinels in turn, then checks with `ROLE` that the server it was given is
//!   a primary). A connection that breaks, times out, or finds its server no longer
//!   the primary (`READONLY`, `MASTERDOWN`, `NOREPLICAS`) makes the store drop all of
//!   its connections, and each new one asks the sentinels again.
//! - `redis+cluster://n1:6379,n2:6379,n3:6379`: a Redis Cluster, through the
//!   driver's async cluster client, found from any of the hosts. Every command of a
//!   store goes to the primary owning its prefix's slot; a node that dies makes the
//!   client reconnect and refresh its slot map, and a `MOVED` answer (sent to a node
//!   that no longer has the slot: nothing was applied) is sent once more after the
//!   refresh. The client's own retries are off, because it would send again a call
//!   whose connection broke after it was sent, which may have been applied.
//!
//! During a failover calls answer [`Error::Unavailable`](tenure_core::Error)
//! (retryable), never another answer; once the new primary is in place the next calls
//! reach it without a restart, and a primary that lacks the function library (a
//! replica promoted after a `FUNCTION FLUSH`, a node added empty) gets it loaded on
//! the first call. Tests kill the primary in the middle of a Worker's drain, behind
//! Sentinel (down-after 1 s, failover-timeout 1 s: the store completed items again
//! 3.3 s after the kill) and on a 3-primary, 3-replica cluster (node timeout 1 s: 3.8
//! s), and check that every item is done and no finish of a superseded lease was
//! accepted.
//!
//! **What the fence does on a failover.** A claim, renewal or finalize the old
//! primary acknowledged may not have reached the replica that is promoted. A lost
//! claim hands the item out again, with the same attempt number; a lost complete
//! makes the item run again; a lost finalize of a lease that expired meanwhile is
//! taken again. Every transition after a failover checks the token against what the
//! new primary holds, so the old owner's late calls are refused as lease lost once a
//! new lease exists there (a test loses a claim that way and checks that the old
//! token is refused and the new owner's accepted).
//!
//! **A primary that stalls** (a long pause, a frozen VM) and is failed over while
//! calls wait in its socket runs them when it resumes, believing itself primary
//! until the sentinels demote it. Its writes are then discarded by the resync, but a
//! caller still waiting for the answer would be told it succeeded. With
//! [`RedisConfig::wait_replicas`] such a call is told
//! [`Error::Unavailable`](tenure_core::Error): the old primary's replica now follows
//! someone else and never acknowledges the write (a test stalls the primary with
//! SIGSTOP, fails over, finishes the item on the new primary, resumes the old one and
//! checks its queued complete is not accepted). Without `WAIT`, a response timeout
//! shorter than a failover and `min-replicas-to-write 1` with `min-replicas-max-lag`
//! on the servers narrow that window; only `WAIT` closes it.
//!
//! **What `WAIT` buys.** With `wait_replicas(n, timeout)` every write is followed by
//! `WAIT n timeout` on the same connection, sent to the primary of the prefix's slot
//! alone (the cluster client would send it to every primary and take the smallest
//! count). A write answered `Ok` then sits on `n` replicas, and Sentinel and Cluster
//! promote the most up-to-date replica, so no acknowledged claim or finalize is lost
//! to a failover of one primary, and the situations above are answered
//! `Unavailable`, never `Ok`. A write that too few replicas acknowledged answers
//! [`Error::Unavailable`](tenure_core::Error) and stays applied (retrying is safe:
//! every finalize is fenced). `WAIT` is not a transaction: the replicas hold the
//! write in memory, and a failover of the primary *and* those replicas at once can
//! still lose it.
//!
//! **What it costs.** One more round trip to the primary and the replica's
//! acknowledgement per write, with the call's connection held meanwhile. Measured with
//! `cargo run --release -p tenure-redis --example wait_cost` (a primary and one replica
//! on loopback, 10,000 items, 4 tasks, claim B then complete the batch in one call, the
//! two settings taking turns, median of three rounds; one run on a 2-core machine that
//! other jobs kept busy, load about 18, so read the ratios, not the rates):
//!
//! | B | no `WAIT`, items/s | `wait_replicas(1, 1 s)`, items/s | ratio |
//! |---|---|---|---|
//! | 1 | 4,271 | 1,487 | 0.35 |
//! | 100 | 6,929 | 6,214 | 0.90 |
//!
//! Per-item calls pay it on every claim and every complete; batches share one `WAIT`
//! among their items.
//!
//! And it needs replicas left after a failover: with one replica, the promoted
//! primary has none, and every write answers `Unavailable` until a replica is linked
//! to it again. Run two replicas per primary to keep `wait_replicas(1, ..)` working
//! through a failover.
//!
//! # Performance
//!
//! `cargo bench -p tenure-benches --bench redis` drains N ready items (20,000 a cell)
//! with W workers claiming B at a time and completing each batch in one call, beside a
//! raw Lua loop (LPOP off a list, a lease hash and an expiry zset, a finalize fenced on
//! `owner:attempt`) in the same run. Figures from one run of every cell on every store
//! are on the benchmarks page of the repository (`docs/benchmarks.md`), which
//! `cargo run --release -p tenure-benches --example bench_page` writes.
//!
//! Where the difference goes. At W = 16 the server is busy the whole drain, so its time
//! per item decides (`INFO commandstats` after `CONFIG RESETSTAT`, 100,000 items, B =
//! 100): about 9.4 µs an item in the store's `FCALL`s against 6 µs in the raw loop's
//! `EVALSHA`s. About half of the store's is its commands: an item is a hash of its own,
//! read by the claim (`HMGET` of the state word, payload and numbers; the keys only
//! when the state word's mark says the item has some), written once (`HSET`), read by
//! the fence (`HGET` of the state word alone) and deleted, and it sits in queue-sized
//! sorted sets (ready, ready by run_at, all, running) that the claim and the complete
//! keep in step with one call per batch each. That bookkeeping is what lets recovery,
//! eviction, `queue_counts` and the listings run without scans; the raw loop touches a
//! list, three hashes and one small sorted set. The other half is the scripts' own
//! work: building keys and state words, matching the state word, and turning replies
//! into Lua tables and back. The claim reads its batch off `ready` without scores
//! (`ZRANGE`, then `ZREMRANGEBYRANK`: `ZPOPMIN` would format every score for the script
//! to parse and drop). Client side, the claim answers one flat array: four values an
//! item (id, attempt, payload, numbers), then an array of its queue and keys only when
//! it has keys or the claim named several queues, decoded in place with the numbers
//! parsed by hand; no array of its own per item.
//!
//! # Errors and faults
//!
//! Connection loss, timeouts, and servers that are loading, read-only, failing over
//! or out of memory (and, behind Sentinel, no healthy primary known to the sentinels;
//! on a cluster, `MOVED`, `ASK`, `TRYAGAIN` and `CLUSTERDOWN`) answer
//! [`Error::Unavailable`](tenure_core::Error) (retryable);
//! `error.rs` holds the table. A call that finds its connection broken drops it and
//! the next call opens a new one, so the same store works again once the server is
//! back, without a restart. A call whose connection broke mid-way may or may not have
//! been applied: every finalize is fenced on `(id, attempt, lease)`, so retrying it can never
//! finalize an item twice. The store loads its function library (`FUNCTION LOAD`)
//! when a call answers `Function not found`, as after a restart without persistence
//! or a `FUNCTION FLUSH`, and sends the call again; with AOF or RDB persistence the
//! library survives a restart like the data. The library's name carries a hash of
//! its text, so stores of different versions can share a server; a library no
//! version uses any more stays until `FUNCTION DELETE tenure_<hash>`.
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
//!   `store/limits.rs` (queue limits). Core's [`Store`](tenure_core::Store) validates
//!   every params struct before these see it;
//! - the schema or scripts, in files of their own;
//! - `tx.rs`, where the store runs inside the application's own transaction.
//!
//! Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs (how the contract is encoded, the schema, durability, errors) and the exports, no logic |
//! | `config.rs` | [`RedisConfig`], and the parsing of the Sentinel and Cluster URLs |
//! | `connect.rs` | connection management, kept beside `config.rs`: one server, Sentinel, Cluster |
//! | `error.rs` | the driver's errors mapped into [`tenure_core::Error`], in one table |
//! | `store/mod.rs` | [`RedisStore`]: the struct, its connections and function calls, and its `Base` impl |
//! | `store/claim.rs` | enqueue and claim |
//! | `store/finalize.rs` | renew, complete, fail and release |
//! | `store/recovery.rs` | time and recovery: recovering expired leases, purge |
//! | `store/instances.rs` | instances and the leader lease |
//! | `store/inspect.rs` | inspection and control: item, counts, listings, cancel, pause, dead items |
//! | `store/admin.rs` | whole-prefix housekeeping outside the contract ([`RedisStore::prefix_in_use`], [`RedisStore::remove_prefix`]) |
//! | `scripts.rs`, `scripts/*.lua` | the schema: the function library, one function per operation, with `lib.lua` spelling out the key layout and the item hash |
//! | `rows.rs` | decoding the functions' answers into the model |
//! | `listen.rs` | the sharded pub/sub wake-ups |
//!
//! There is no `tx.rs`: Redis has no transaction of the application's to join.
#![deny(missing_docs)]

mod config;
mod connect;
mod error;
mod listen;
mod rows;
mod scripts;
mod store;

pub use config::{RedisConfig, URL_SCHEMES};
pub use store::RedisStore;

pub(crate) use error::STORE;
