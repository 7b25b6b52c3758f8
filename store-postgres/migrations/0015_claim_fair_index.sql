-- Fair shares (G18): the tagged ready heads in fair order, so a claim of a fair queue
-- reads its heads in the order it serves them (`sql/limits/candidates_fair.sql`)
-- instead of sorting the queue's ready items. Partial on tagged rows: only fair
-- queues' items have a tag (`ftag`, migration 10), so queues without fair shares pay
-- nothing for it.
-- On an existing schema the migration runner builds it first with CREATE INDEX
-- CONCURRENTLY outside any transaction (migrate.rs, CONCURRENT_INDEXES); on a new
-- schema the table is empty and this statement builds it. Applying this file by hand
-- (migration_script) to a large live table: build the index concurrently first, with
-- the same name and definition.
CREATE INDEX IF NOT EXISTS items_claim_fair
    ON __SCHEMA__.items (queue, priority, ftag, run_at, seq)
    WHERE state = 'ready' AND head AND ftag IS NOT NULL;
