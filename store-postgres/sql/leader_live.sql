-- G13, read only: the holder of a live lease.
--
-- $1 name (text)
-- $2 now (int8 micros)
SELECT holder, term, expires_at FROM {schema}.leaders
WHERE name = $1 AND expires_at > $2
