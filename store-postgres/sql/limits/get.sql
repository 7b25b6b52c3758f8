-- The limits of queue $1 (`limits_set` reads what it replaces with it, in its
-- transaction). No row: the queue has none.
SELECT concurrency, key_concurrency, rate_starts, rate_per, key_rate_starts, key_rate_per
FROM {schema}.queue_limits WHERE queue = $1
