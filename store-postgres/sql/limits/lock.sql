-- Takes the claim lock of each claimed queue: a transaction-scoped advisory lock on
-- a hash of (schema, queue), so it works behind a transaction-pooling proxy and is
-- released by the commit or rollback. Queues are locked in one order (by name), so
-- two limited claims never wait for each other in a cycle.
-- $1 the claimed queues (text[]).
SELECT count(pg_advisory_xact_lock(hashtextextended('tenure-limits:{schema}:' || q.name, 0)))
FROM (SELECT DISTINCT n AS name FROM unnest($1::text[]) AS t(n) ORDER BY 1) AS q
