-- `candidates.sql` for claims of fair queues (G18): in the order of fair shares,
-- priority first, then the start tag (a row without one counts as tag 1), then G8
-- order. The claimable items of the open queues, passing over the limit keys a
-- limited claim found shut, locked with FOR UPDATE SKIP LOCKED; the claim admits or
-- passes over each in Rust under its limits. An item is claimable as in the ordinary
-- claim: a ready stream head, due, unscoped or the first eligible item of a scope with
-- no running item.
-- A fair queue's tagged heads are read in fair order from `items_claim_fair`
-- (migration 15), never sorted. Its heads without a tag (enqueued by a handle that
-- had not seen the queue turn fair; they count as tag 1) are looked for among its
-- first heads in G8 order, so each is found once it is among them. The open queues
-- that are not fair are read as in `candidates.sql`.
-- $1 open queues (text[]), $2 now (micros), $3 most rows per queue, $4 queues and
-- $5 limit keys (text[], pairwise) of the shut keys, $6 the fair queues among $1.
SELECT c.id, c.queue, c.limit_key, c.ftag FROM (
    SELECT c.* FROM (SELECT n FROM unnest($1::text[]) AS t(n)
        WHERE NOT n = ANY($6::text[])) AS q(name)
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
        ORDER BY p.priority, p.run_at, p.seq
        LIMIT $3
        FOR UPDATE OF p SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.* FROM unnest($6::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT p.id, p.queue, p.limit_key, p.ftag, p.priority, p.run_at, p.seq
        FROM {schema}.items p
        WHERE p.queue = q.name AND p.state = 'ready' AND p.head AND p.ftag IS NOT NULL
            AND p.run_at <= $2
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
        ORDER BY p.priority, p.ftag, p.run_at, p.seq
        LIMIT $3
        FOR UPDATE OF p SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.* FROM unnest($6::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT p.id, p.queue, p.limit_key, p.ftag, p.priority, p.run_at, p.seq
        FROM {schema}.items p
        WHERE p.id IN (SELECT f.id FROM (
                SELECT h.id, h.ftag FROM {schema}.items h
                WHERE h.queue = q.name AND h.state = 'ready' AND h.head AND h.run_at <= $2
                ORDER BY h.priority, h.run_at, h.seq
                LIMIT $3) AS f
            WHERE f.ftag IS NULL)
            AND p.state = 'ready' AND p.head AND p.ftag IS NULL
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
        FOR UPDATE OF p SKIP LOCKED
    ) c
) c
ORDER BY c.priority, coalesce(c.ftag, 1), c.run_at, c.seq
