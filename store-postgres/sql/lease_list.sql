-- Store::lease_list: a page of a queue's live leases through `items_running` (queue,
-- lease_expires_at), from the cursor's (expiry, seq), without FOR UPDATE; each with
-- the limit key whose slot it holds (G16).
--
-- $1 queue (text)
-- $2 the cursor's expiry (int8 micros)
-- $3 the cursor's seq (int8)
-- $4 the most rows (int8)
SELECT i.id, i.attempt, i.owner, i.lease_expires_at, i.renewals,
    i.max_renewals, i.seq, i.lease, i.limit_key FROM {schema}.items i
WHERE i.queue = $1 AND i.state = 'running'
    AND (i.lease_expires_at, i.seq) > ($2, $3)
ORDER BY i.lease_expires_at, i.seq LIMIT $4
