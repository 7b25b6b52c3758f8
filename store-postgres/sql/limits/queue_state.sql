-- Each claimed queue's limits and where it stands, read under its claim lock.
-- $1 the claimed queues (text[]), $2 now (micros).
-- `running`: its running items (a slot is a lease); `starts`: its starts in the
-- window of its rate; `deferred`: a deferral of the whole queue not yet over;
-- `paused`: an operator paused it; `fair`: it keeps fair shares (G18); `has_limits`:
-- it has a `queue_limits` row (its unkeyed items are marked `lq`, migration 13).
SELECT q.name AS queue, l.queue IS NOT NULL AS has_limits, l.concurrency, l.key_concurrency, l.rate_starts, l.rate_per,
    l.key_rate_starts, l.key_rate_per,
    (SELECT count(*) FROM {schema}.items r
        WHERE r.queue = q.name AND r.state = 'running') AS running,
    (SELECT count(*) FROM {schema}.limit_starts s
        WHERE s.queue = q.name AND s.key = '' AND s.at > $2 - l.rate_per) AS starts,
    EXISTS (SELECT 1 FROM {schema}.limit_defers d
        WHERE d.queue = q.name AND d.key = '' AND d.until > $2) AS deferred,
    EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = q.name) AS paused,
    EXISTS (SELECT 1 FROM {schema}.fair_queues f WHERE f.queue = q.name) AS fair
FROM unnest($1::text[]) AS q(name)
LEFT JOIN {schema}.queue_limits l ON l.queue = q.name
