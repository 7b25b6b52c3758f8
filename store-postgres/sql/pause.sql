-- Store::queue_pause; answers a row only when the queue was not paused.
--
-- $1 queue (text)
-- $2 now (int8 micros)
INSERT INTO {schema}.paused_queues (queue, paused_at) VALUES ($1, $2)
ON CONFLICT (queue) DO NOTHING
