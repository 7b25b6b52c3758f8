-- machine::enqueue. The identity default draws `seq` row by row in `ord` order, so
-- enqueue order is the order of the call's items. Answers the number inserted.
-- G14: `phash` is tenure_core::partition::key_hash, computed in Rust.
--
-- $1  now (int8 micros)
-- $2  ids (uuid[])
-- $3  queues (text[])
-- $4  payloads (bytea[])
-- $5  streams (text[], NULL for none)
-- $6  scopes (text[], NULL for none)
-- $7  dedup keys (text[], NULL for none)
-- $8  priorities (int2[])
-- $9  run_at (int8[] micros)
-- $10 head: whether the item is its stream's head (bool[])
-- $11 max_attempts (int4[])
-- $12 max_stalls (int4[])
-- $13 max_renewals (int4[])
-- $14 phash: the partition hash of the stream or id (int8[])
WITH ins AS (
    INSERT INTO {schema}.items (id, queue, payload, stream, scope, dedup_key, priority,
        run_at, state, head, attempt, renewals, stalls, max_attempts, max_stalls,
        max_renewals, created_at, updated_at, phash)
    SELECT t.id, t.queue, t.payload, t.stream, t.scope, t.dedup_key, t.priority,
        t.run_at, 'ready', t.head, 0, 0, 0, t.max_attempts, t.max_stalls,
        t.max_renewals, $1, $1, t.phash
    FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::text[],
        $7::text[], $8::int2[], $9::int8[], $10::bool[], $11::int4[], $12::int4[],
        $13::int4[], $14::int8[]) WITH ORDINALITY
        AS t(id, queue, payload, stream, scope, dedup_key, priority, run_at, head,
             max_attempts, max_stalls, max_renewals, phash, ord)
    ORDER BY t.ord
    RETURNING 1
)
SELECT count(*) FROM ins
