-- `candidates.sql` for claims of fair queues (G18): in the order of fair shares,
-- priority first, then the start tag (a row without one counts as tag 1), then G8
-- order. The claimable items of the open queues, passing over the
-- limit keys a limited claim found shut, locked with FOR UPDATE SKIP LOCKED; the
-- claim admits or passes over each in Rust under its limits. An item is claimable as
-- in the ordinary claim: a ready stream head, due, unscoped or the first eligible
-- item of a scope with no running item.
-- $1 open queues (text[]), $2 now (micros), $3 most rows per queue, $4 queues and
-- $5 limit keys (text[], pairwise) of the shut keys.
SELECT c.id, c.queue, c.limit_key, c.ftag
FROM unnest($1::text[]) AS q(name)
CROSS JOIN LATERAL (
    SELECT p.id, p.queue, p.limit_key, p.ftag, p.priority, p.run_at, p.seq
    FROM {schema}.items p
    WHERE p.queue = q.name AND p.state = 'ready' AND p.head AND p.run_at <= $2
        AND (p.limit_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM unnest($4::text[], $5::text[]) AS x(queue, key)
            WHERE x.queue = p.queue AND x.key = p.limit_key))
        AND (p.scope IS NULL OR (
            NOT EXISTS (SELECT 1 FROM {schema}.items r
                WHERE r.scope = p.scope AND r.state = 'running')
            AND NOT EXISTS (SELECT 1 FROM {schema}.items e
                WHERE e.scope = p.scope AND e.state = 'ready' AND e.head
                    AND e.run_at <= $2 AND e.queue = ANY($1::text[])
                    AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq))))
    ORDER BY p.priority, coalesce(p.ftag, 1), p.run_at, p.seq
    LIMIT $3
    FOR UPDATE OF p SKIP LOCKED
) c
ORDER BY c.priority, coalesce(c.ftag, 1), c.run_at, c.seq
