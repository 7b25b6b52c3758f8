-- G11: the items that hold keys an enqueue could not take.
--
-- $1 queues (text[])
-- $2 keys (text[])
SELECT d.queue, d.key, d.item_id FROM {schema}.dedup_keys d
JOIN unnest($1::text[], $2::text[]) AS t(queue, key)
    ON d.queue = t.queue AND d.key = t.key
