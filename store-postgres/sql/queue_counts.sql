-- A queue's counts by state, its oldest due ready item's run_at, and whether it is
-- paused.
--
-- $1 queue (text)
-- $2 now (int8 micros)
SELECT count(*) FILTER (WHERE state = 'ready' AND run_at <= $2),
       count(*) FILTER (WHERE state = 'ready' AND run_at > $2),
       count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'dead'),
       count(*) FILTER (WHERE state = 'done'),
       min(run_at) FILTER (WHERE state = 'ready' AND run_at <= $2),
       EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = $1)
FROM {schema}.items WHERE queue = $1
