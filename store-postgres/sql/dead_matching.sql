-- The dead items a filter matches, earliest death first, at most its limit.
--
-- $1 queue (text)
-- $2 dead at or before (int8 micros)
-- $3 the most rows (int8)
SELECT i.id FROM {schema}.items i
WHERE i.queue = $1 AND i.state = 'dead' AND i.updated_at <= $2
ORDER BY i.updated_at, i.seq LIMIT $3
