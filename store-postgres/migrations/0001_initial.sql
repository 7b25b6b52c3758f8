-- Tenure's tables. __SCHEMA__ is replaced by the configured (validated) schema name.
-- Times are BIGINT microseconds since the Unix epoch, always bound from the store's
-- clock; nothing here calls now().

-- The hot table. Finished rows are deleted by default, so it stays narrow.
CREATE TABLE __SCHEMA__.items (
    id               uuid PRIMARY KEY,
    -- Enqueue order: the last claim-order key (G8) and the order within a stream (G9).
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    queue            text     NOT NULL,
    payload          bytea    NOT NULL,
    stream           text,
    scope            text,
    dedup_key        text,
    priority         smallint NOT NULL,
    run_at           bigint   NOT NULL,
    state            text     NOT NULL CHECK (state IN ('ready', 'running', 'done', 'dead')),
    -- G9: true for an item without a stream, and for the first unfinished item of its
    -- stream. Only heads are claimable; a finish (complete, discard) promotes the next.
    head             boolean  NOT NULL,
    attempt          integer  NOT NULL,
    owner            text,
    lease_expires_at bigint,
    renewals         integer  NOT NULL,
    stalls           integer  NOT NULL,
    max_attempts     integer  NOT NULL,
    max_stalls       integer  NOT NULL,
    max_renewals     integer  NOT NULL,
    last_error       text,
    created_at       bigint   NOT NULL,
    updated_at       bigint   NOT NULL
);

-- The claim scans this and nothing else: ready heads in claim order (G7, G8, G9).
-- No other index has this order, so the planner has no look-alike to flip to.
CREATE INDEX items_claim ON __SCHEMA__.items (queue, priority, run_at, seq)
    WHERE state = 'ready' AND head;

-- Expired-lease recovery and eviction (G2, G6, G12).
CREATE INDEX items_running ON __SCHEMA__.items (queue, lease_expires_at)
    WHERE state = 'running';

-- G10 as a schema invariant: at most one running item per scope.
CREATE UNIQUE INDEX items_scope_running ON __SCHEMA__.items (scope)
    WHERE state = 'running' AND scope IS NOT NULL;

-- G10 within one batch: the first eligible item of a scope.
CREATE INDEX items_scope_ready ON __SCHEMA__.items (scope, priority, run_at, seq)
    WHERE state = 'ready' AND head AND scope IS NOT NULL;

-- G9: the waiting (non-head) items of a stream, in enqueue order, for the promote.
CREATE INDEX items_stream_waiting ON __SCHEMA__.items (stream, seq)
    WHERE NOT head;

-- Purge of kept finished items.
CREATE INDEX items_done ON __SCHEMA__.items (updated_at)
    WHERE state = 'done';

-- One row per stream with unfinished items: how many. Enqueue and finish lock it, so
-- the head decision of an enqueue and the promote of a finish never interleave.
CREATE TABLE __SCHEMA__.streams (
    stream  text PRIMARY KEY,
    pending bigint NOT NULL CHECK (pending >= 0)
);

-- G11: dedup keys live apart from items, with their own expiry.
CREATE TABLE __SCHEMA__.dedup_keys (
    queue      text   NOT NULL,
    key        text   NOT NULL,
    item_id    uuid   NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE INDEX dedup_keys_expiry ON __SCHEMA__.dedup_keys (expires_at);

-- G12.
CREATE TABLE __SCHEMA__.instances (
    id         text   PRIMARY KEY,
    started_at bigint NOT NULL,
    last_seen  bigint NOT NULL
);

-- G13: one row per leader lease; term only ever goes up.
CREATE TABLE __SCHEMA__.leaders (
    name       text   PRIMARY KEY,
    holder     text   NOT NULL,
    term       bigint NOT NULL,
    expires_at bigint NOT NULL
);
