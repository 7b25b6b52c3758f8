-- G13: a leader lease, live or not.
--
-- $1 name (text)
SELECT holder, term, expires_at FROM {schema}.leaders WHERE name = $1
