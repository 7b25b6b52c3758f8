-- Makes the queues $1 (text[]) fair (G18) where they are not yet, at virtual time 0,
-- in name order; answers the queues it made fair.
INSERT INTO {schema}.fair_queues (queue, vtime)
SELECT q.name, 0 FROM (SELECT DISTINCT n AS name FROM unnest($1::text[]) AS t(n)) AS q
ORDER BY q.name
ON CONFLICT (queue) DO NOTHING
RETURNING queue
