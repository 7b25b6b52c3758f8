-- machine::recover over up to $2 expired leases, oldest expiry first.
--
-- $1 now (int8 micros)
-- $2 the most leases to recover (int8)
-- $3 queues (text[], all when NULL)
WITH r AS (
    UPDATE {schema}.items i SET {stall_set}
    WHERE i.id = ANY(ARRAY(
        SELECT x.id FROM {schema}.items x
        WHERE x.state = 'running' AND x.lease_expires_at <= $1
            AND ($3::text[] IS NULL OR x.queue = ANY($3::text[]))
        ORDER BY x.lease_expires_at LIMIT $2
        FOR UPDATE SKIP LOCKED))
        AND i.state = 'running' AND i.lease_expires_at <= $1
    RETURNING i.id, i.state
)
SELECT id, state FROM r
