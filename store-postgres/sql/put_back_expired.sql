-- G9: before recovery stalls expired leases, the running items behind an expired
-- running item of their stream (the rest of its run) go back to ready untouched
-- (machine::put_back), so only the run's head counts a stall. The items behind each
-- head are found through `items_stream_waiting`, at most the longest run's worth
-- ({max_stream_run}) per stream, so a long stream costs no more.
--
-- $1 now (int8 micros)
-- $2 queues (text[], all when NULL)
UPDATE {schema}.items b SET state = 'ready', owner = NULL, lease_expires_at = NULL,
    max_attempts = b.max_attempts + 1, updated_at = $1
WHERE b.id IN (
    SELECT z.id FROM (
        SELECT DISTINCT ON (x.stream) x.stream, x.seq FROM {schema}.items x
        WHERE x.state = 'running' AND x.lease_expires_at <= $1
            AND x.stream IS NOT NULL
            AND ($2::text[] IS NULL OR x.queue = ANY($2::text[]))
        ORDER BY x.stream, x.seq
    ) e CROSS JOIN LATERAL (
        SELECT w.id, w.state FROM {schema}.items w
        WHERE w.stream = e.stream AND NOT w.head AND w.seq > e.seq
        ORDER BY w.seq LIMIT {max_stream_run}) z
    WHERE z.state = 'running'
) AND b.state = 'running'
