-- The operator's inspection and control.
--
-- items_list serves listings by queue and state in enqueue order, the dead-item
-- filters and the skip scan of known queues: a page reads its own rows through it and
-- takes no lock. On a large existing table, build it first with
-- CREATE INDEX CONCURRENTLY (same name and definition) so this migration finds it.
CREATE INDEX IF NOT EXISTS items_list ON __SCHEMA__.items (queue, state, seq);

-- One row per paused queue. A claim passes a queue over while its row exists; it
-- reads this table by primary key, once per queue it names, in the claim statement.
CREATE TABLE __SCHEMA__.paused_queues (
    queue     text   PRIMARY KEY,
    paused_at bigint NOT NULL
);
