-- Store::history_add: adds each entry's counts to its queue and minute, one row per
-- entry (the params hold no queue and minute twice).
--
-- $1 queues (text[])
-- $2 minutes (int8[] micros, each the start of a minute)
-- $3 finished (int8[])
-- $4 failed (int8[])
-- $5 dead (int8[])
INSERT INTO {schema}.history AS h (queue, minute, finished, failed, dead)
SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[])
ON CONFLICT (queue, minute) DO UPDATE SET
    finished = h.finished + excluded.finished,
    failed = h.failed + excluded.failed,
    dead = h.dead + excluded.dead
