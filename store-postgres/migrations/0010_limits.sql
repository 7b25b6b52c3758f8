-- Queue limits (G16 concurrency, G17 rate) and fair shares (G18).
--
-- An item keeps the limit key its enqueue named. The columns are nullable with no
-- default, so adding them rewrites nothing and code older than this migration keeps
-- inserting rows (without a key) and claiming them as before.
--
-- A slot is a lease: the running count of a queue or of a key is never stored; a
-- limited claim counts the `running` rows of the key (index `items_running_limit`,
-- migration 11) after it has taken its queue's claim lock, a transaction-scoped
-- advisory lock, and inside the same transaction. A row leaves `running` only by its
-- own fenced finish, by recovery or by eviction, so a stale writer cannot skew the
-- count and a superseded lease's late finish frees nothing.
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS limit_key text;
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS fairness_key text;
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS weight integer;
-- Fair shares (G18): an item's start tag plus one, fixed at enqueue in a fair queue;
-- NULL in a queue that is not fair (and in rows written before it became fair,
-- which count as tag 1, the oldest).
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS ftag bigint;

-- One row per queue with limits. A NULL column is no such limit; a rate is
-- `*_starts` claims per `*_per` microseconds.
CREATE TABLE IF NOT EXISTS __SCHEMA__.queue_limits (
    queue text PRIMARY KEY,
    concurrency bigint,
    key_concurrency bigint,
    rate_starts bigint,
    rate_per bigint,
    key_rate_starts bigint,
    key_rate_per bigint
);

-- Per-key overrides (kind 'override') and fair-share weights (kind 'weight') of a
-- queue's limits.
CREATE TABLE IF NOT EXISTS __SCHEMA__.queue_limit_keys (
    queue text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('override', 'weight')),
    key text NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (queue, kind, key)
);

-- The starts of the last period of each rate, one row per start: the queue's own
-- under the key '' (no limit key is empty), each limit key's under its name. A rate
-- allows a start while fewer than `starts` of its rows are in the window, so it is
-- exact in every window, not only in windows aligned to a counter's reset. Rows that
-- left the window are deleted by the next limited claim of the key.
CREATE TABLE IF NOT EXISTS __SCHEMA__.limit_starts (
    queue text NOT NULL,
    key text NOT NULL,
    at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS limit_starts_key ON __SCHEMA__.limit_starts (queue, key, at);

-- Deferrals (limits_defer): no start of the key ('' for the whole queue) before
-- `until`.
CREATE TABLE IF NOT EXISTS __SCHEMA__.limit_defers (
    queue text NOT NULL,
    key text NOT NULL,
    until bigint NOT NULL,
    PRIMARY KEY (queue, key)
);

-- Fair shares (G18): one row per fair queue (one that ever saw a fairness key) with
-- its virtual time, and one per tenant of it with its finish tag. An enqueue into a
-- fair queue locks the queue's row while it tags its items; a claim moves the
-- virtual time on to the tags it served.
CREATE TABLE IF NOT EXISTS __SCHEMA__.fair_queues (
    queue text PRIMARY KEY,
    vtime bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS __SCHEMA__.fair_tenants (
    queue text NOT NULL,
    tenant text NOT NULL,
    finish bigint NOT NULL,
    PRIMARY KEY (queue, tenant)
);
