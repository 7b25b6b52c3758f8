-- G14: claim.sql restricted to the owner's share, pinning the streams it takes from,
-- in one statement like the ordinary claim.
--
-- `share` reads the registry once: whether the owner is registered, its rank (how
-- many registered ids are smaller in byte order) and how many instances are live.
-- An item is in the owner's share when its stream is pinned to the owner, or it is
-- unpinned and its partition is the owner's by rank; an unregistered owner takes
-- nothing. The share filter applies to the claimed item (`p`) and to the earlier
-- items of its scope (`e`), so an item of another instance's share does not hide the
-- owner's items behind it.
--
-- A pin to an instance that is no longer registered counts as no pin: eviction
-- clears pins, and this covers a claim that committed a pin while its owner was being
-- evicted. The pin is a primary-key lookup of the stream's row (none without a
-- stream), and of its instance when it is pinned to another; the lookup names no
-- `pinned_to` condition, so the planner cannot trade it for a walk over the partial
-- index `streams_pinned`. A NULL `phash` (a row older than migration 3) is computed
-- by `tenure_key_hash`, which agrees with Rust's.
--
-- `pinned` pins the claimed items' streams to the owner where they have no pin, or
-- one to an instance no longer registered. An unregistered owner picks nothing and
-- the caller answers NotFound before looking at `expired`, so nothing is written,
-- not even a recovery.
--
-- $1 .. $6 as in claim.sql
-- $7 the number of partitions (int8)
-- $8 lease id (int8)
WITH share AS MATERIALIZED (
    SELECT coalesce(bool_or(n.id = $4), false) AS registered,
        count(*) FILTER (WHERE n.id COLLATE "C" < $4::text COLLATE "C") AS rank,
        count(*) AS live
    FROM {schema}.instances n
), guard AS MATERIALIZED (
    SELECT (SELECT h.registered FROM share h) AND $6::boolean
        AND EXISTS (SELECT 1 FROM unnest($1::text[]) AS gq(name)
        WHERE EXISTS (SELECT 1 FROM {schema}.items x WHERE x.state = 'running'
            AND x.queue = gq.name AND x.lease_expires_at <= $2
            AND x.lease_expires_at >= coalesce((SELECT k.lease_floor
                FROM {schema}.claim_cursors k WHERE k.queue = gq.name),
                (-9223372036854775807 - 1)))) AS expired
), picked AS MATERIALIZED (
    SELECT c.id FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT coalesce(k.priority, (-32768)::int2) AS kp,
            coalesce(k.run_at, (-9223372036854775807 - 1)) AS kr,
            coalesce(k.seq, (-9223372036854775807 - 1)) AS ks
        FROM (VALUES (1)) AS o(x)
        LEFT JOIN {schema}.claim_cursors k ON k.queue = q.name
    ) cur
    CROSS JOIN LATERAL (
        SELECT p.id, p.priority, p.run_at, p.seq FROM {schema}.items p
        WHERE p.queue = q.name AND p.state = 'ready' AND p.head AND p.run_at <= $2
            AND NOT (SELECT g.expired FROM guard g)
            AND (p.scope IS NULL OR (
                NOT EXISTS (SELECT 1 FROM {schema}.items r
                    WHERE r.scope = p.scope AND r.state = 'running')
                AND NOT EXISTS (SELECT 1 FROM {schema}.items e
                    WHERE e.scope = p.scope AND e.state = 'ready' AND e.head
                        AND e.run_at <= $2 AND e.queue = ANY($1::text[])
                        AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq)
                        AND (SELECT h.registered FROM share h)
                        AND coalesce(
                            (SELECT CASE WHEN st.pinned_to IS NULL THEN NULL
                                         WHEN st.pinned_to = $4 THEN true
                                         WHEN EXISTS (SELECT 1 FROM {schema}.instances n
                                             WHERE n.id = st.pinned_to) THEN false END
                             FROM {schema}.streams st WHERE st.stream = e.stream),
                            (coalesce(e.phash, {schema}.tenure_key_hash(e.stream, e.id))
                                % $7::int8)
                                % nullif((SELECT h.live FROM share h), 0)
                                = (SELECT h.rank FROM share h)))))
            AND (SELECT h.registered FROM share h)
            AND coalesce(
                (SELECT CASE WHEN st.pinned_to IS NULL THEN NULL
                             WHEN st.pinned_to = $4 THEN true
                             WHEN EXISTS (SELECT 1 FROM {schema}.instances n
                                 WHERE n.id = st.pinned_to) THEN false END
                 FROM {schema}.streams st WHERE st.stream = p.stream),
                (coalesce(p.phash, {schema}.tenure_key_hash(p.stream, p.id)) % $7::int8)
                    % nullif((SELECT h.live FROM share h), 0)
                    = (SELECT h.rank FROM share h))
            AND (p.priority, p.run_at, p.seq) >= (cur.kp, cur.kr, cur.ks)
        ORDER BY p.priority, p.run_at, p.seq
        LIMIT $3
        FOR UPDATE OF p SKIP LOCKED
    ) c
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = q.name)
    ORDER BY c.priority, c.run_at, c.seq
    LIMIT $3
), claimed AS (
    UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
        owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2,
        lease = $8
    WHERE i.id = ANY(ARRAY(SELECT id FROM picked)) AND i.state = 'ready'
    RETURNING {item_cols}
), pinned AS (
    UPDATE {schema}.streams st SET pinned_to = $4
    WHERE st.stream IN (SELECT c.stream FROM claimed c WHERE c.stream IS NOT NULL)
        AND (st.pinned_to IS NULL
             OR NOT EXISTS (SELECT 1 FROM {schema}.instances n
                 WHERE n.id = st.pinned_to))
)
SELECT (SELECT h.registered FROM share h) AS registered,
    (SELECT g.expired FROM guard g) AS expired, i.*
FROM (VALUES (1)) AS one(x) LEFT JOIN claimed i ON true
