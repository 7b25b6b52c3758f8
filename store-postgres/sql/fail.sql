-- machine::fail, fenced on (id, attempt, lease). G9: with the put-back rule for the
-- items of a run behind a failed one: after the rows of `f` left `running`
-- unfinished, the later running items of their streams go back to ready untouched
-- (machine::put_back). A running item that is not a head is always behind an earlier
-- running item of its own run, so the waiting-items index `items_stream_waiting`
-- finds them, at most the longest run's worth ({max_stream_run}) per stream. Rows of
-- `f` itself are left to `f`. On `(SELECT 'running'::text)`, see renew.sql.
--
-- $1 now (int8 micros)
-- $2 ids (uuid[])
-- $3 attempts (int4[])
-- $4 retry run_at (int8[] micros, NULL for a permanent failure)
-- $5 errors (text[])
-- $6 lease ids (int8[])
WITH f AS (UPDATE {schema}.items i SET owner = NULL, lease_expires_at = NULL, updated_at = $1,
    last_error = t.error,
    state = CASE WHEN t.retry_at IS NOT NULL AND i.attempt < i.max_attempts
        THEN 'ready' ELSE 'dead' END,
    run_at = CASE WHEN t.retry_at IS NOT NULL AND i.attempt < i.max_attempts
        THEN t.retry_at ELSE i.run_at END
FROM unnest($2::uuid[], $3::int4[], $4::int8[], $5::text[], $6::int8[])
    AS t(id, attempt, retry_at, error, lease)
WHERE i.id = ANY($2::uuid[]) AND i.id = t.id AND i.attempt = t.attempt
    AND i.lease = t.lease AND i.state = (SELECT 'running'::text)
RETURNING i.id, i.state, i.run_at, i.stream, i.seq),
pb AS (
    UPDATE {schema}.items b SET state = 'ready', owner = NULL,
        lease_expires_at = NULL, max_attempts = b.max_attempts + 1,
        updated_at = $1
    WHERE b.id IN (
        SELECT z.id FROM (
            SELECT DISTINCT ON (x.stream) x.stream, x.seq FROM f x
            WHERE x.stream IS NOT NULL ORDER BY x.stream, x.seq
        ) e CROSS JOIN LATERAL (
            SELECT w.id, w.state FROM {schema}.items w
            WHERE w.stream = e.stream AND NOT w.head AND w.seq > e.seq
            ORDER BY w.seq LIMIT {max_stream_run}) z
        WHERE z.state = 'running'
    ) AND b.state = 'running'
        AND NOT EXISTS (SELECT 1 FROM f y WHERE y.id = b.id)
)
SELECT f.id, f.state, f.run_at FROM f
