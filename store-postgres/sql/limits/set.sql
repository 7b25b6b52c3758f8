-- Writes a queue's limits, answering nothing. $1 queue, $2 concurrency,
-- $3 key_concurrency, $4 rate starts, $5 rate period (micros), $6 key rate starts,
-- $7 key rate period (micros); NULL for no such limit.
INSERT INTO {schema}.queue_limits AS l (queue, concurrency, key_concurrency, rate_starts,
    rate_per, key_rate_starts, key_rate_per)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (queue) DO UPDATE SET concurrency = EXCLUDED.concurrency,
    key_concurrency = EXCLUDED.key_concurrency, rate_starts = EXCLUDED.rate_starts,
    rate_per = EXCLUDED.rate_per, key_rate_starts = EXCLUDED.key_rate_starts,
    key_rate_per = EXCLUDED.key_rate_per
