-- Forgets the starts of the queues $1 (text[]) that left the window of their rate at
-- $2 (micros), and those of a rate the queue no longer has.
DELETE FROM {schema}.limit_starts s
USING {schema}.queue_limits l
WHERE l.queue = s.queue AND s.queue = ANY($1::text[])
    AND coalesce(s.at <= $2 - CASE WHEN s.key = '' THEN l.rate_per ELSE l.key_rate_per END,
        true)
