//! The schema's versions: each migration step and the SQL it runs, in order.

use rusqlite::{params, Connection};
use tenure_core::partition::key_hash;
use tenure_core::{ItemId, StreamKey};

/// The schema version this crate creates and understands (kept in `tenure_meta`).
pub const SCHEMA_VERSION: i64 = 11;

/// One migration step, run inside the migration transaction. A step is Rust, not just
/// SQL, so it can compute what SQL cannot (v2 back-fills the FNV-1a partition hash).
pub(crate) type Migration = fn(&Connection) -> rusqlite::Result<()>;

/// Migrations, in order: `MIGRATIONS[i]` takes version `i` to `i + 1`. A new file runs
/// them all, so a fresh schema and a migrated one are the same.
pub(crate) const MIGRATIONS: &[Migration] = &[
    migrate_v1,
    migrate_v2,
    migrate_v3,
    migrate_v4,
    migrate_v5,
    migrate_v6,
    migrate_v7,
    migrate_v8,
    migrate_v9,
    migrate_v10,
    migrate_v11,
];

fn migrate_v1(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V1)
}

/// Version 1.
///
/// - `seq` (the rowid) is the enqueue order (G8, G9); a new row always gets a seq above
///   every existing row.
/// - `head` is 1 for an item without a stream and for the first unfinished item of its
///   stream, 0 for the items queued behind it (G9). It is maintained in the write path:
///   set at enqueue, moved to the next item when a head completes or is discarded. The
///   claim reads only `head = 1` rows through `tenure_items_ready`, so a long stream
///   costs the claim nothing.
/// - `tenure_items_running_scope` is the G10 invariant: two running items with one scope
///   cannot both exist, whatever a claim does.
pub(crate) const V1: &str = "
CREATE TABLE tenure_items (
    seq              INTEGER PRIMARY KEY,
    id               BLOB    NOT NULL UNIQUE,
    queue            TEXT    NOT NULL,
    payload          BLOB    NOT NULL,
    stream           TEXT,
    scope            TEXT,
    dedup_key        TEXT,
    priority         INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('ready', 'running', 'done', 'dead')),
    head             INTEGER NOT NULL CHECK (head IN (0, 1)),
    attempt          INTEGER NOT NULL,
    owner            TEXT,
    lease_expires_at INTEGER,
    renewals         INTEGER NOT NULL,
    stalls           INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL,
    max_stalls       INTEGER NOT NULL,
    max_renewals     INTEGER NOT NULL,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX tenure_items_ready
    ON tenure_items (queue, priority, run_at, seq) WHERE state = 'ready' AND head = 1;
CREATE UNIQUE INDEX tenure_items_running_scope
    ON tenure_items (scope) WHERE state = 'running' AND scope IS NOT NULL;
CREATE INDEX tenure_items_expiry
    ON tenure_items (lease_expires_at) WHERE state = 'running';
CREATE INDEX tenure_items_stream
    ON tenure_items (stream, seq) WHERE stream IS NOT NULL AND state <> 'done';
CREATE INDEX tenure_items_done
    ON tenure_items (updated_at) WHERE state = 'done';

CREATE TABLE tenure_dedup (
    queue       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    item_id     BLOB    NOT NULL,
    recorded_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE INDEX tenure_dedup_expiry ON tenure_dedup (expires_at);

CREATE TABLE tenure_instances (
    id         TEXT    NOT NULL UNIQUE,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
);

CREATE TABLE tenure_leaders (
    name       TEXT    PRIMARY KEY,
    holder     TEXT,
    term       INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Version 2: G14 partitioned claiming.
///
/// - `phash` is [`key_hash`] of the item's stream key, or of its id when it has none,
///   computed in Rust at enqueue (never negative). A partitioned claim filters on
///   `(phash % partitions) % live = rank`. The `DEFAULT 0` only exists because SQLite
///   adds a `NOT NULL` column with a default; [`migrate_v2`] back-fills every existing
///   row in the same transaction, and every insert after it writes the real hash.
/// - `tenure_stream_pins` holds one row per pinned stream: the instance that claimed
///   it in partitioned mode. A table rather than a column on the items, because a pin
///   belongs to the stream, not to any one item: a column would have to be written on
///   every item of the stream when it is pinned, copied onto each new item at enqueue
///   (a cost on the ordinary enqueue path) and cleared on all of them at eviction. The
///   table is one primary-key probe per candidate in the partitioned scan and one
///   indexed delete per instance at eviction; ordinary claims never read it.
pub(crate) const V2: &str = "
ALTER TABLE tenure_items ADD COLUMN phash INTEGER NOT NULL DEFAULT 0;

CREATE TABLE tenure_stream_pins (
    stream   TEXT NOT NULL PRIMARY KEY,
    instance TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX tenure_stream_pins_instance ON tenure_stream_pins (instance);
";

/// Version 1 to 2: adds [`V2`], then back-fills `phash` of every existing row (finished
/// ones too, so the column never lies) from its id and stream, one pass by rowid.
fn migrate_v2(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V2)?;
    let mut read = conn.prepare("SELECT seq, id, stream FROM tenure_items")?;
    let mut write = conn.prepare("UPDATE tenure_items SET phash = ?2 WHERE seq = ?1")?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let id: Vec<u8> = row.get(1)?;
        let stream: Option<String> = row.get(2)?;
        let hash = row_hash(&id, stream).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Blob,
                format!("corrupt row: item seq {seq}: {e}").into(),
            )
        })?;
        write.execute(params![seq, hash])?;
    }
    Ok(())
}

/// The state check of versions 1 and 2. SQLite evaluates an `IN` list of more than
/// two constants through a temporary b-tree built on every statement that writes
/// `state` (an insert, every claim's update), which measured as about a third of the
/// claim's cost at 100 items per claim.
const STATE_CHECK_IN: &str = "CHECK (state IN ('ready', 'running', 'done', 'dead'))";

/// The same check as comparisons, which SQLite evaluates in place.
pub(crate) const STATE_CHECK_OR: &str =
    "CHECK (state = 'ready' OR state = 'running' OR state = 'done' OR state = 'dead')";

/// Version 2 to 3: the state check of `tenure_items` written as [`STATE_CHECK_OR`].
/// The two accept exactly the same rows, so the stored rows and indexes stay as they
/// are and only the table's definition changes, by SQLite's documented procedure for
/// schema changes that do not touch the stored content (`writable_schema`, then a new
/// `schema_version` so every connection reloads the schema).
fn migrate_v3(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
    conn.execute_batch("PRAGMA writable_schema = ON")?;
    let changed = conn.execute(
        "UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2)
         WHERE type = 'table' AND name = 'tenure_items' AND instr(sql, ?1) > 0",
        [STATE_CHECK_IN, STATE_CHECK_OR],
    );
    let bumped = changed
        .and_then(|_| conn.execute_batch(&format!("PRAGMA schema_version = {}", version + 1)));
    // RESET also makes this connection parse the new definition at once.
    conn.execute_batch("PRAGMA writable_schema = OFF; PRAGMA writable_schema = RESET")?;
    bumped
}

/// Version 4: the operator's inspection and control.
///
/// - `tenure_items_list` serves listings by queue and state in enqueue order (and the
///   dead-item filters, the known-queue scan): a page reads its rows through it and
///   never scans the table. Version 5 leaves running items out of it ([`V5`]).
/// - `tenure_queues` holds one row per paused queue; a claim probes it by primary key
///   once per queue it names and passes a paused queue over.
pub(crate) const V4: &str = "
CREATE INDEX tenure_items_list ON tenure_items (queue, state, seq);

CREATE TABLE tenure_queues (
    queue     TEXT    NOT NULL PRIMARY KEY,
    paused_at INTEGER NOT NULL
) WITHOUT ROWID;
";

fn migrate_v4(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V4)
}

/// Version 5: `tenure_items_list` leaves running items out.
///
/// Every claim moved each claimed row's entry from `ready` to `running` in the list
/// index and every complete removed it again: two more index pages written per claim
/// and per complete transaction, and about 12k instructions per item at 100 items per
/// claim. Running items are the ones `tenure_items_expiry` (`lease_expires_at`, then
/// the rowid, `WHERE state = 'running'`) already holds, so the listings of running
/// items and leases read that index instead: a listing of running items reads every
/// running item of the file (as many as the leases held, not the backlog) and sorts
/// them, and a lease listing walks it in its own order.
pub(crate) const V5: &str = "
DROP INDEX tenure_items_list;
CREATE INDEX tenure_items_list ON tenure_items (queue, state, seq) WHERE state <> 'running';
";

fn migrate_v5(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V5)
}

/// Version 6: `lease`, the id each claim mints for its lease (G3).
///
/// Every fence checks it beside `attempt`, so a token names its lease: a file copied
/// back from an earlier state (a restored backup, a replica that had not seen the
/// latest claims) hands an attempt number out again under a new lease id, and the
/// tokens of the forgotten claims stay refused. Rows running when the file is upgraded
/// keep lease id 0 (`LeaseId::NONE`), which no claim mints: their leases were granted
/// by a version that did not mint one, and they recover by expiry as before.
pub(crate) const V6: &str = "
ALTER TABLE tenure_items ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
";

fn migrate_v6(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V6)
}

/// Version 7: queue limits (G16 concurrency, G17 rate).
///
/// - `limit_key` is the item's limit key. A slot is a lease: a key's running count is
///   `count(*)` of its `running` rows through `tenure_items_running_limit`, read in the
///   claim's own `BEGIN IMMEDIATE` transaction, never a counter another writer keeps.
///   Rows running when the file is upgraded have no key and count for their queue only.
/// - `tenure_limits` holds one row per queue with limits; `tenure_limit_keys` its
///   per-key overrides and fairness weights.
/// - `tenure_limit_starts` holds the starts of the last period of each rate (key `''`
///   for the queue's own rate: no limit key is empty), pruned as claims read them;
///   `tenure_limit_defers` the deferrals (`Store::limits_defer`).
pub(crate) const V7: &str = "
ALTER TABLE tenure_items ADD COLUMN limit_key TEXT;
CREATE INDEX tenure_items_running_limit
    ON tenure_items (queue, limit_key) WHERE state = 'running';

CREATE TABLE tenure_limits (
    queue           TEXT    NOT NULL PRIMARY KEY,
    concurrency     INTEGER,
    key_concurrency INTEGER,
    rate_starts     INTEGER,
    rate_per        INTEGER,
    key_rate_starts INTEGER,
    key_rate_per    INTEGER
) WITHOUT ROWID;

CREATE TABLE tenure_limit_keys (
    queue TEXT    NOT NULL,
    kind  TEXT    NOT NULL CHECK (kind = 'override' OR kind = 'weight'),
    key   TEXT    NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (queue, kind, key)
) WITHOUT ROWID;

CREATE TABLE tenure_limit_starts (
    seq   INTEGER PRIMARY KEY,
    queue TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    at    INTEGER NOT NULL
);
CREATE INDEX tenure_limit_starts_key ON tenure_limit_starts (queue, key, at);

CREATE TABLE tenure_limit_defers (
    queue TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    until INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
";

fn migrate_v7(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V7)
}

/// Version 8: fair shares (G18).
///
/// - `ftag` is the item's start tag plus one in its queue's start-time fair queueing,
///   fixed at enqueue; 0 in a queue whose items never named a tenant. When a queue's
///   first item with a fairness key arrives, its existing unfinished items get tag 1
///   (one update, once), so every ready head of a fair queue is in
///   `tenure_items_ready_fair`, which holds only rows with a tag: queues without fair
///   shares pay nothing for it.
/// - `tenure_fair_queues` holds each fair queue's virtual time; `tenure_fair` each
///   tenant's finish tag (tenant `''` for items without a fairness key).
pub(crate) const V8: &str = "
ALTER TABLE tenure_items ADD COLUMN ftag INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tenure_items_ready_fair
    ON tenure_items (queue, priority, ftag, run_at, seq)
    WHERE state = 'ready' AND head = 1 AND ftag > 0;

CREATE TABLE tenure_fair_queues (
    queue TEXT    NOT NULL PRIMARY KEY,
    vtime INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE tenure_fair (
    queue  TEXT    NOT NULL,
    tenant TEXT    NOT NULL,
    finish INTEGER NOT NULL,
    PRIMARY KEY (queue, tenant)
) WITHOUT ROWID;
";

fn migrate_v8(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V8)
}

/// Version 9: the ready heads of limited queues by limit key (G16), so a claim can
/// pass over a saturated key without reading its backlog.
///
/// - `lq` is 1 on the items of a queue with limits: set at enqueue when the queue has
///   a `tenure_limits` row, and on the queue's unfinished items by `limits_set` (and
///   here, for the queues limited at upgrade). Queues without limits keep 0, so their
///   items are not in the new index and their enqueues and claims pay nothing for it.
/// - `tenure_items_ready_key` holds the ready heads of limited queues, keyed or not
///   (no key sorts first), in claim order (G8) within each key: the claim's key walk
///   (`ops/claim.rs`) steps from key to key through it and reads each open key's
///   heads, so a saturated key's backlog is one index seek, not a scan.
pub(crate) const V9: &str = "
ALTER TABLE tenure_items ADD COLUMN lq INTEGER NOT NULL DEFAULT 0;
UPDATE tenure_items SET lq = 1
    WHERE state <> 'done' AND queue IN (SELECT queue FROM tenure_limits);
CREATE INDEX tenure_items_ready_key
    ON tenure_items (queue, limit_key, priority, run_at, seq)
    WHERE state = 'ready' AND head = 1 AND lq = 1;
";

fn migrate_v9(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V9)
}

/// Version 10: `progress`, the last progress a holder reported with an accepted
/// renewal, as [`Progress::encode`](tenure_core::Progress::encode) writes it (its
/// attempt, its fraction in ten-thousandths, its message). Written only by a renewal
/// that reports progress, so a renewal without it writes what it wrote before.
pub(crate) const V10: &str = "
ALTER TABLE tenure_items ADD COLUMN progress TEXT;
";

fn migrate_v10(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V10)
}

/// Version 11: the work history, per queue and minute (the `History` group): sums the
/// workers add every few seconds, read by the dashboard.
pub(crate) const V11: &str = "
CREATE TABLE IF NOT EXISTS tenure_history (
    queue    TEXT    NOT NULL,
    minute   INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    failed   INTEGER NOT NULL,
    dead     INTEGER NOT NULL,
    PRIMARY KEY (queue, minute)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tenure_history_minute ON tenure_history (minute);
";

fn migrate_v11(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(V11)
}

/// [`key_hash`] of a stored row's id and stream.
fn row_hash(id: &[u8], stream: Option<String>) -> std::result::Result<i64, String> {
    let bytes: [u8; 16] = id
        .try_into()
        .map_err(|_| format!("id of {} bytes", id.len()))?;
    let id = ItemId::from_uuid(uuid::Uuid::from_bytes(bytes));
    let stream = stream
        .map(StreamKey::new)
        .transpose()
        .map_err(|e| e.to_string())?;
    Ok(key_hash(stream.as_ref(), id))
}
