-- Store::queue_list: a skip scan of items_list's first column (one index probe per
-- queue), with the paused queues. No parameters.
WITH RECURSIVE t(q) AS (
    (SELECT queue FROM {schema}.items ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT queue FROM {schema}.items WHERE queue > t.q ORDER BY queue LIMIT 1)
    FROM t WHERE t.q IS NOT NULL
)
SELECT q FROM t WHERE q IS NOT NULL
UNION SELECT queue FROM {schema}.paused_queues ORDER BY 1
