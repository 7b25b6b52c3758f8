-- G11: record each new key, or take over a key whose window has passed. Keys arrive
-- sorted, so concurrent enqueues lock them in one order. Answers the keys taken.
--
-- $1 now (int8 micros)
-- $2 queues (text[])
-- $3 keys (text[])
-- $4 the items the keys now name (uuid[])
-- $5 the keys' expiry (int8[] micros)
INSERT INTO {schema}.dedup_keys AS d (queue, key, item_id, expires_at)
SELECT t.queue, t.key, t.item_id, t.expires_at
FROM unnest($2::text[], $3::text[], $4::uuid[], $5::int8[])
    WITH ORDINALITY AS t(queue, key, item_id, expires_at, ord)
ORDER BY t.ord
ON CONFLICT (queue, key) DO UPDATE
    SET item_id = EXCLUDED.item_id, expires_at = EXCLUDED.expires_at
    WHERE d.expires_at <= $1
RETURNING d.queue, d.key
