-- Store::queue_resume.
--
-- $1 queue (text)
DELETE FROM {schema}.paused_queues WHERE queue = $1
