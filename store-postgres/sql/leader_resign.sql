-- G13: the holder ends its live lease now.
--
-- $1 name (text)
-- $2 holder (text)
-- $3 now (int8 micros)
UPDATE {schema}.leaders SET expires_at = $3
WHERE name = $1 AND holder = $2 AND expires_at > $3 RETURNING 1
