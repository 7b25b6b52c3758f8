-- G9: the runs behind claimed stream heads. Each run takes the waiting items right
-- behind its head (the index `items_stream_waiting`) while each is ready, due, in the
-- claimed queues and of a free scope, the first of its scope in the run;
-- machine::claim on them. Only the owner of a running head can claim the items behind
-- it (a claim takes heads only), so no lock is needed; the scope index stays the
-- backstop for G10.
--
-- $1 streams (text[])
-- $2 their heads' seq (int8[])
-- $3 the most items each run may add (int8[])
-- $4 now (int8 micros)
-- $5 queues (text[])
-- $6 owner (text)
-- $7 lease expiry (int8 micros)
-- $8 lease id (int8)
WITH h AS (SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[])
    AS h(stream, seq, room)),
c AS MATERIALIZED (
    SELECT b.id, b.stream, b.seq, b.scope,
        (b.state = 'ready' AND b.run_at <= $4 AND b.queue = ANY($5::text[])
         AND (b.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.items r
             WHERE r.scope = b.scope AND r.state = 'running'))) AS ok
    FROM h CROSS JOIN LATERAL (
        SELECT x.id, x.stream, x.seq, x.scope, x.state, x.run_at, x.queue
        FROM {schema}.items x
        WHERE x.stream = h.stream AND NOT x.head AND x.seq > h.seq
            AND x.state <> 'done'
        ORDER BY x.seq LIMIT h.room) b
), n AS (
    SELECT c.id, c.stream, c.seq, c.ok AND (c.scope IS NULL OR
        row_number() OVER (PARTITION BY c.stream, c.scope ORDER BY c.seq) = 1)
        AS ok
    FROM c
), w AS (
    SELECT n.id, bool_and(n.ok) OVER (PARTITION BY n.stream ORDER BY n.seq)
        AS take
    FROM n
), claimed AS (
    UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
        owner = $6, lease_expires_at = $7, renewals = 0, updated_at = $4,
        lease = $8
    WHERE i.id = ANY(ARRAY(SELECT id FROM w WHERE take))
        AND i.state = 'ready' AND NOT i.head
    RETURNING {item_cols}
)
SELECT i.* FROM claimed i
