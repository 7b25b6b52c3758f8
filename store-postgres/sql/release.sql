-- machine::release, fenced on (id, attempt, lease). G9: with the put-back rule of
-- fail.sql for the items of a run behind a released one. On
-- `(SELECT 'running'::text)`, see renew.sql.
--
-- $1 now (int8 micros)
-- $2 ids (uuid[])
-- $3 attempts (int4[])
-- $4 lease ids (int8[])
WITH f AS (UPDATE {schema}.items i SET state = 'ready', run_at = $1, owner = NULL,
    lease_expires_at = NULL, updated_at = $1,
    max_attempts = i.max_attempts + 1
FROM unnest($2::uuid[], $3::int4[], $4::int8[]) AS t(id, attempt, lease)
WHERE i.id = ANY($2::uuid[]) AND i.id = t.id AND i.attempt = t.attempt
    AND i.lease = t.lease AND i.state = (SELECT 'running'::text)
RETURNING i.id, i.stream, i.seq),
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
SELECT f.id FROM f
