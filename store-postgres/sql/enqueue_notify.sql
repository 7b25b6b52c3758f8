-- enqueue.sql, plus one NOTIFY per statement (PostgreSQL coalesces identical
-- notifications of one transaction, and delivers them on commit).
--
-- $1 .. $14 as in enqueue.sql
-- $15 the notification channel (text)
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
SELECT count(*), pg_notify($15, '') FROM ins
