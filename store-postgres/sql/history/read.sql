-- Store::history: one queue's minutes in a span that have a count, earliest first.
--
-- $1 queue (text)
-- $2 since (int8 micros, inclusive)
-- $3 until (int8 micros, exclusive)
SELECT minute, finished, failed, dead FROM {schema}.history
WHERE queue = $1 AND minute >= $2 AND minute < $3
    AND (finished > 0 OR failed > 0 OR dead > 0)
ORDER BY minute
