-- G13: take a free or expired lease with the next term, or extend our own.
--
-- $1 name (text)
-- $2 holder (text)
-- $3 now (int8 micros)
-- $4 the lease's expiry (int8 micros)
INSERT INTO {schema}.leaders AS l (name, holder, term, expires_at)
VALUES ($1, $2, 1, $4)
ON CONFLICT (name) DO UPDATE SET
    term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > $3
        THEN l.term ELSE l.term + 1 END,
    holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= $3 OR l.holder = EXCLUDED.holder
RETURNING l.term, l.expires_at
