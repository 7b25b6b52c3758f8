-- machine::requeue: dead items become ready now, with room for $3 more attempts (the
-- attempt count never goes down).
--
-- $1 now (int8 micros)
-- $2 ids (uuid[])
-- $3 additional attempts (int4)
UPDATE {schema}.items SET state = 'ready', run_at = $1, stalls = 0,
    max_attempts = GREATEST(max_attempts, attempt + $3), updated_at = $1
WHERE id = ANY($2::uuid[]) AND state = 'dead'
