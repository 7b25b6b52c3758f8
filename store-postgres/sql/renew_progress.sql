-- renew.sql, keeping the progress the holders report (migration 16): run instead of
-- renew.sql only when a renewal reports some, so a renewal without progress runs the
-- statement it ran before. Progress is written only on rows the renewal extends
-- (fenced on (id, attempt, lease), under the cap), and a NULL entry keeps what the row
-- holds.
--
-- $1 now (int8 micros)
-- $2 ids (uuid[])
-- $3 attempts (int4[])
-- $4 the new lease expiry (int8 micros)
-- $5 lease ids (int8[])
-- $6 progress, as Progress::encode writes it, or NULL (text[])
WITH cur AS MATERIALIZED (
    SELECT i.id, i.renewals, i.max_renewals, t.progress FROM {schema}.items i
    JOIN unnest($2::uuid[], $3::int4[], $5::int8[], $6::text[]) AS t(id, attempt, lease, progress)
        ON i.id = t.id AND i.attempt = t.attempt AND i.lease = t.lease
    WHERE i.id = ANY($2::uuid[]) AND i.state = (SELECT 'running'::text)
    FOR UPDATE OF i
), upd AS (
    UPDATE {schema}.items i SET lease_expires_at = $4,
        renewals = i.renewals + 1, updated_at = $1,
        progress = COALESCE(cur.progress, i.progress)
    FROM cur WHERE i.id = cur.id AND cur.renewals < cur.max_renewals
    RETURNING i.id, i.renewals
)
SELECT cur.id, cur.max_renewals, upd.renewals
FROM cur LEFT JOIN upd ON upd.id = cur.id
