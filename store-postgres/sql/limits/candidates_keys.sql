-- `candidates.sql` by limit key (G16), for a round after the one before passed over
-- mostly items of saturated keys: the same claimable items of the open queues, in
-- claim order (G8), passing over the shut keys, locked with FOR UPDATE SKIP LOCKED,
-- read key by key through `items_claim_key` (migration 14) instead of in one walk of
-- `items_claim`. `k` steps from key to key with one index seek each (a loose index
-- scan), so a shut key's backlog costs one seek, not a scan; each open key gives its
-- first heads, at most its limit (an override, else the queue's default; more of
-- them could not be admitted), the heads without a key (`lq`) one more stream, and
-- the merge of these per-key orders is the claim order of the open keys' items.
-- The unkeyed heads are ordered by `limit_key` first (all NULL, so the same order)
-- so that the planner reads them from `items_claim_key` in its order, not from
-- `items_claim` past every keyed head.
-- $1 open queues (text[]), $2 now (micros), $3 most rows, $4 queues and $5 limit
-- keys (text[], pairwise) of the shut keys.
WITH RECURSIVE k(queue, key) AS (
    SELECT q.name, (SELECT p.limit_key FROM {schema}.items p
        WHERE p.queue = q.name AND p.state = 'ready' AND p.head
            AND p.limit_key IS NOT NULL
        ORDER BY p.limit_key LIMIT 1)
    FROM unnest($1::text[]) AS q(name)
    UNION ALL
    SELECT k.queue, (SELECT p.limit_key FROM {schema}.items p
        WHERE p.queue = k.queue AND p.state = 'ready' AND p.head
            AND p.limit_key > k.key
        ORDER BY p.limit_key LIMIT 1)
    FROM k WHERE k.key IS NOT NULL
), open_keys AS (
    SELECT k.queue, k.key,
        least($3, coalesce(o.value, l.key_concurrency, $3)) AS n
    FROM k
    LEFT JOIN {schema}.queue_limits l ON l.queue = k.queue
    LEFT JOIN {schema}.queue_limit_keys o
        ON o.queue = k.queue AND o.kind = 'override' AND o.key = k.key
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM unnest($4::text[], $5::text[]) AS x(queue, key)
        WHERE x.queue = k.queue AND x.key = k.key)
)
SELECT c.id, c.queue, c.limit_key, c.ftag FROM (
    SELECT c.* FROM open_keys o
    CROSS JOIN LATERAL (
        SELECT p.id, p.queue, p.limit_key, p.ftag, p.priority, p.run_at, p.seq
        FROM {schema}.items p
        WHERE p.queue = o.queue AND p.limit_key = o.key AND p.state = 'ready' AND p.head
            AND p.run_at <= $2
            AND (p.scope IS NULL OR (
                NOT EXISTS (SELECT 1 FROM {schema}.items r
                    WHERE r.scope = p.scope AND r.state = 'running')
                AND NOT EXISTS (SELECT 1 FROM {schema}.items e
                    WHERE e.scope = p.scope AND e.state = 'ready' AND e.head
                        AND e.run_at <= $2 AND e.queue = ANY($1::text[])
                        AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq))))
        ORDER BY p.priority, p.run_at, p.seq
        LIMIT o.n
        FOR UPDATE OF p SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.* FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT p.id, p.queue, p.limit_key, p.ftag, p.priority, p.run_at, p.seq
        FROM {schema}.items p
        WHERE p.queue = q.name AND p.limit_key IS NULL AND p.lq AND p.state = 'ready'
            AND p.head AND p.run_at <= $2
            AND (p.scope IS NULL OR (
                NOT EXISTS (SELECT 1 FROM {schema}.items r
                    WHERE r.scope = p.scope AND r.state = 'running')
                AND NOT EXISTS (SELECT 1 FROM {schema}.items e
                    WHERE e.scope = p.scope AND e.state = 'ready' AND e.head
                        AND e.run_at <= $2 AND e.queue = ANY($1::text[])
                        AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq))))
        ORDER BY p.limit_key, p.priority, p.run_at, p.seq
        LIMIT $3
        FOR UPDATE OF p SKIP LOCKED
    ) c
) c
ORDER BY c.priority, c.run_at, c.seq
LIMIT $3
