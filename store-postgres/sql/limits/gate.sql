-- Whether a claim must take the limited path.
-- $1 the claimed queues (text[]), $2 now (micros).
-- Answers `any_limits`: some queue of the schema has limits, a deferral not yet
-- over, or fair shares; `limited`: one of the claimed queues has.
SELECT
    EXISTS (SELECT 1 FROM {schema}.queue_limits)
        OR EXISTS (SELECT 1 FROM {schema}.limit_defers d WHERE d.until > $2)
        OR EXISTS (SELECT 1 FROM {schema}.fair_queues) AS any_limits,
    EXISTS (SELECT 1 FROM {schema}.queue_limits l WHERE l.queue = ANY($1::text[]))
        OR EXISTS (SELECT 1 FROM {schema}.limit_defers d
            WHERE d.queue = ANY($1::text[]) AND d.until > $2)
        OR EXISTS (SELECT 1 FROM {schema}.fair_queues f
            WHERE f.queue = ANY($1::text[])) AS limited
