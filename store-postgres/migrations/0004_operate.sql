-- The operator's inspection and control.
--
-- items_list serves listings by queue and state in enqueue order, the dead-item
-- filters and the skip scan of known queues: a page reads its own rows through it and
-- takes no lock. On an existing schema the migration runner builds it first with
-- CREATE INDEX CONCURRENTLY outside any transaction (migrate.rs, CONCURRENT_INDEXES;
-- an INVALID leftover of an interrupted build is dropped and built again), so writes
-- go on meanwhile and this statement finds it; on a new schema the table is empty and
-- this statement builds it. Applying this file by hand (migration_script) to a large
-- live table: build the index concurrently first, with the same name and definition.
CREATE INDEX IF NOT EXISTS items_list ON __SCHEMA__.items (queue, state, seq);

-- One row per paused queue. A claim passes a queue over while its row exists; it
-- reads this table by primary key, once per queue it names, in the claim statement.
CREATE TABLE __SCHEMA__.paused_queues (
    queue     text   PRIMARY KEY,
    paused_at bigint NOT NULL
);
