-- Locks the fair queues among $1 (text[]) for an enqueue that tags items, in name
-- order, and answers each with its virtual time (G18).
SELECT f.queue, f.vtime FROM {schema}.fair_queues f
WHERE f.queue = ANY($1::text[])
ORDER BY f.queue
FOR UPDATE
