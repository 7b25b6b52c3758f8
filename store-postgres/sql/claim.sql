-- machine::claim over the collection rules, in one statement.
--
-- `picked`: per queue, a plain scan of the partial index `items_claim` (ready heads,
-- in claim order) with FOR UPDATE SKIP LOCKED, starting at the queue's claim cursor
-- (migration 9: no committed ready head is below it, and the index entries of the
-- items claimed before it, dead but kept while any session holds an old snapshot,
-- are not walked); then the first $3 of them all in claim order. A claimable item is
-- a ready stream head, due, with recovery not pending, and either unscoped or the
-- first eligible item of a scope that has no running item (so one batch takes at most
-- one item per scope). Paused queues pick nothing.
--
-- `guard`: with $6, whether any running item of these queues has a lease expired at
-- $2; each queue's check starts at its cursor's `lease_floor` (migration 9). When it
-- has, nothing is picked: the caller recovers first and claims again (contract:
-- recovery first). `(-9223372036854775807 - 1)` is the smallest bigint, the bound of
-- a queue that has no cursor yet.
--
-- `claimed`: machine::claim on the picked rows. `id = ANY(ARRAY(...))` fences the
-- pick from the UPDATE.
--
-- $1 queues (text[])
-- $2 now (int8 micros)
-- $3 the most items to claim (int8)
-- $4 owner (text)
-- $5 lease expiry (int8 micros)
-- $6 check for expired leases first (bool)
-- $7 lease id (int8)
WITH guard AS MATERIALIZED (
    SELECT $6::boolean AND EXISTS (SELECT 1 FROM unnest($1::text[]) AS gq(name)
        WHERE EXISTS (SELECT 1 FROM {schema}.items x WHERE x.state = 'running'
            AND x.queue = gq.name AND x.lease_expires_at <= $2
            AND x.lease_expires_at >= coalesce((SELECT k.lease_floor
                FROM {schema}.claim_cursors k WHERE k.queue = gq.name),
                (-9223372036854775807 - 1)))) AS expired
), picked AS MATERIALIZED (
    SELECT c.id FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT coalesce(k.priority, (-32768)::int2) AS kp,
            coalesce(k.run_at, (-9223372036854775807 - 1)) AS kr,
            coalesce(k.seq, (-9223372036854775807 - 1)) AS ks
        FROM (VALUES (1)) AS o(x)
        LEFT JOIN {schema}.claim_cursors k ON k.queue = q.name
    ) cur
    CROSS JOIN LATERAL (
        SELECT p.id, p.priority, p.run_at, p.seq FROM {schema}.items p
        WHERE p.queue = q.name AND p.state = 'ready' AND p.head AND p.run_at <= $2
            AND NOT (SELECT g.expired FROM guard g)
            AND (p.scope IS NULL OR (
                NOT EXISTS (SELECT 1 FROM {schema}.items r
                    WHERE r.scope = p.scope AND r.state = 'running')
                AND NOT EXISTS (SELECT 1 FROM {schema}.items e
                    WHERE e.scope = p.scope AND e.state = 'ready' AND e.head
                        AND e.run_at <= $2 AND e.queue = ANY($1::text[])
                        AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq))))
            AND (p.priority, p.run_at, p.seq) >= (cur.kp, cur.kr, cur.ks)
        ORDER BY p.priority, p.run_at, p.seq
        LIMIT $3
        FOR UPDATE OF p SKIP LOCKED
    ) c
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = q.name)
    ORDER BY c.priority, c.run_at, c.seq
    LIMIT $3
), claimed AS (
    UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
        owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2,
        lease = $7
    WHERE i.id = ANY(ARRAY(SELECT id FROM picked)) AND i.state = 'ready'
    RETURNING {item_cols}
)
SELECT (SELECT g.expired FROM guard g) AS expired, i.*
FROM (VALUES (1)) AS one(x) LEFT JOIN claimed i ON true
