-- The running items of a queue by limit key: a limited claim counts a key's running
-- rows through it (migration 10). Partial on `running` items that have a key, so it
-- holds only the leases a limit can count, and no statement without a key condition
-- (the claim's check for expired leases, which must use `items_running` and its
-- `lease_floor` bound) can be planned on it.
-- On an existing schema the migration runner builds it first with CREATE INDEX
-- CONCURRENTLY outside any transaction (migrate.rs, CONCURRENT_INDEXES; the column it
-- needs comes with migration 10, committed before the build); on a new schema the
-- table is empty and this statement builds it. Applying this file by hand
-- (migration_script) to a large live table: build the index concurrently first, with
-- the same name and definition.
CREATE INDEX IF NOT EXISTS items_running_limit ON __SCHEMA__.items (queue, limit_key)
    WHERE state = 'running' AND limit_key IS NOT NULL;
