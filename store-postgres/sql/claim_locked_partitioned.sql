-- The second pass of a partitioned claim: claim_locked.sql with the share filter and
-- the pinning of claim_partitioned.sql.
--
-- $1 ids (uuid[], one)
-- $2 now (int8 micros)
-- $3 queues (text[])
-- $4 owner (text)
-- $5 lease expiry (int8 micros)
-- $6 the number of partitions (int8)
-- $7 lease id (int8)
WITH share AS MATERIALIZED (
    SELECT coalesce(bool_or(n.id = $4), false) AS registered,
        count(*) FILTER (WHERE n.id COLLATE "C" < $4::text COLLATE "C") AS rank,
        count(*) AS live
    FROM {schema}.instances n
), claimed AS (
    UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
        owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2,
        lease = $7
    WHERE i.id = ANY($1::uuid[]) AND i.state = 'ready' AND i.head
        AND i.run_at <= $2 AND i.queue = ANY($3::text[])
        AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = i.queue)
        AND (i.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.items r
            WHERE r.scope = i.scope AND r.state = 'running'))
        AND (SELECT h.registered FROM share h)
        AND coalesce(
            (SELECT CASE WHEN st.pinned_to IS NULL THEN NULL
                         WHEN st.pinned_to = $4 THEN true
                         WHEN EXISTS (SELECT 1 FROM {schema}.instances n
                             WHERE n.id = st.pinned_to) THEN false END
             FROM {schema}.streams st WHERE st.stream = i.stream),
            (coalesce(i.phash, {schema}.tenure_key_hash(i.stream, i.id)) % $6::int8)
                % nullif((SELECT h.live FROM share h), 0)
                = (SELECT h.rank FROM share h))
    RETURNING {item_cols}
), pinned AS (
    UPDATE {schema}.streams st SET pinned_to = $4
    WHERE st.stream IN (SELECT c.stream FROM claimed c WHERE c.stream IS NOT NULL)
        AND (st.pinned_to IS NULL
             OR NOT EXISTS (SELECT 1 FROM {schema}.instances n
                 WHERE n.id = st.pinned_to))
)
SELECT i.* FROM claimed i
