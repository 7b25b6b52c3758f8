-- Removes queue $1's limits with their overrides, weights, rate starts and
-- deferrals; answers one row when it had limits.
WITH k AS (DELETE FROM {schema}.queue_limit_keys WHERE queue = $1),
     s AS (DELETE FROM {schema}.limit_starts WHERE queue = $1),
     d AS (DELETE FROM {schema}.limit_defers WHERE queue = $1)
DELETE FROM {schema}.queue_limits WHERE queue = $1 RETURNING queue
