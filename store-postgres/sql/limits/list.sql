-- The queues with limits, by name.
SELECT queue FROM {schema}.queue_limits ORDER BY queue
