-- machine::renew, fenced on (id, attempt, lease); the rows of current tokens come
-- back with the cap check's result (`upd.renewals` NULL when refused).
--
-- `(SELECT 'running'::text)` is 'running', but no partial index's predicate can be
-- proven from it, so the planner looks the batch's rows up by primary key. Written as
-- the literal, the condition matched `items_running`, and a generic plan estimating
-- few running rows scanned that whole index for the ids: under an old snapshot it
-- holds an entry for every item finished since (migration 9 does the same inside
-- `tenure_complete`). fail.sql, release.sql and still_current.sql do the same.
--
-- $1 now (int8 micros)
-- $2 ids (uuid[])
-- $3 attempts (int4[])
-- $4 the new lease expiry (int8 micros)
-- $5 lease ids (int8[])
WITH cur AS MATERIALIZED (
    SELECT i.id, i.renewals, i.max_renewals FROM {schema}.items i
    JOIN unnest($2::uuid[], $3::int4[], $5::int8[]) AS t(id, attempt, lease)
        ON i.id = t.id AND i.attempt = t.attempt AND i.lease = t.lease
    WHERE i.id = ANY($2::uuid[]) AND i.state = (SELECT 'running'::text)
    FOR UPDATE OF i
), upd AS (
    UPDATE {schema}.items i SET lease_expires_at = $4,
        renewals = i.renewals + 1, updated_at = $1
    FROM cur WHERE i.id = cur.id AND cur.renewals < cur.max_renewals
    RETURNING i.id, i.renewals
)
SELECT cur.id, cur.max_renewals, upd.renewals
FROM cur LEFT JOIN upd ON upd.id = cur.id
