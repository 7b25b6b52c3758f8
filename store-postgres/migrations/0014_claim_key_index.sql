-- The ready heads of limited queues by limit key (G16), step 2: a limited claim that
-- found keys saturated steps from key to key through this index (a loose index scan
-- over `(queue, limit_key)`, one seek per key) and reads each open key's first heads
-- in claim order (`sql/limits/candidates_keys.sql`), so a saturated key's backlog is
-- passed over with one seek instead of a scan. Partial: keyed ready heads, and the
-- unkeyed ones of limited queues (`lq`, migration 13).
-- On an existing schema the migration runner builds it first with CREATE INDEX
-- CONCURRENTLY outside any transaction (migrate.rs, CONCURRENT_INDEXES; the column it
-- needs comes with migration 13, committed before the build); on a new schema the
-- table is empty and this statement builds it. Applying this file by hand
-- (migration_script) to a large live table: build the index concurrently first, with
-- the same name and definition.
CREATE INDEX IF NOT EXISTS items_claim_key
    ON __SCHEMA__.items (queue, limit_key, priority, run_at, seq)
    WHERE state = 'ready' AND head AND (limit_key IS NOT NULL OR lq);
