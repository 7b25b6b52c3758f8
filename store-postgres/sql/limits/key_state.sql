-- Where some limit keys stand, read under their queue's claim lock.
-- $1 queues (text[]), $2 limit keys (text[], pairwise with $1), $3 now (micros).
-- `override`: the key's own concurrency limit; `running`: its running items,
-- counted through `items_running_limit`; `starts`: its starts in the window of the
-- queue's key rate; `deferred`: a deferral of the key not yet over.
SELECT t.queue, t.key,
    (SELECT o.value FROM {schema}.queue_limit_keys o
        WHERE o.queue = t.queue AND o.kind = 'override' AND o.key = t.key) AS override,
    (SELECT count(*) FROM {schema}.items r
        WHERE r.queue = t.queue AND r.limit_key = t.key AND r.state = 'running') AS running,
    (SELECT count(*) FROM {schema}.limit_starts s
        WHERE s.queue = t.queue AND s.key = t.key AND s.at > $3 - l.key_rate_per) AS starts,
    EXISTS (SELECT 1 FROM {schema}.limit_defers d
        WHERE d.queue = t.queue AND d.key = t.key AND d.until > $3) AS deferred
FROM unnest($1::text[], $2::text[]) AS t(queue, key)
LEFT JOIN {schema}.queue_limits l ON l.queue = t.queue
