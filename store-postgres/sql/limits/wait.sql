-- The soonest instant after $2 (micros) at which time alone may make an item of the
-- queues $1 (text[]) claimable: a deferral's end, the instant an exhausted rate
-- allows a start again (its oldest start in the window leaves it), and, under a
-- concurrency limit, the next expiry of a running lease. NULL: none.
SELECT min(w.t) AS at FROM (
    SELECT d.until AS t FROM {schema}.limit_defers d
    WHERE d.queue = ANY($1::text[]) AND d.until > $2
    UNION ALL
    SELECT min(s.at) + max(CASE WHEN s.key = '' THEN l.rate_per ELSE l.key_rate_per END)
    FROM {schema}.limit_starts s JOIN {schema}.queue_limits l ON l.queue = s.queue
    WHERE s.queue = ANY($1::text[])
        AND s.at > $2 - CASE WHEN s.key = '' THEN l.rate_per ELSE l.key_rate_per END
    GROUP BY s.queue, s.key
    HAVING count(*) >= max(CASE WHEN s.key = '' THEN l.rate_starts ELSE l.key_rate_starts END)
    UNION ALL
    SELECT min(r.lease_expires_at) FROM {schema}.items r
    JOIN {schema}.queue_limits l ON l.queue = r.queue
    WHERE r.queue = ANY($1::text[]) AND r.state = 'running'
        AND (l.concurrency IS NOT NULL OR l.key_concurrency IS NOT NULL
            OR EXISTS (SELECT 1 FROM {schema}.queue_limit_keys o
                WHERE o.queue = l.queue AND o.kind = 'override'))
) AS w
WHERE w.t > $2
