-- The work history (the `History` group of the contract): per queue and minute, the
-- sums of finished, failed and dead attempts that workers add every few seconds with
-- one additive upsert (`sql/history/add.sql`). Minutes older than the contract's
-- HISTORY_KEEP are deleted in bounded batches through `history_minute`
-- (`sql/history/prune.sql`). The claim and finalize statements never touch it.
CREATE TABLE IF NOT EXISTS __SCHEMA__.history (
    queue    text   NOT NULL,
    minute   bigint NOT NULL,
    finished bigint NOT NULL,
    failed   bigint NOT NULL,
    dead     bigint NOT NULL,
    PRIMARY KEY (queue, minute)
);
CREATE INDEX IF NOT EXISTS history_minute ON __SCHEMA__.history (minute);
