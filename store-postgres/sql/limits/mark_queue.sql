-- Marks the unfinished items without a limit key of a queue that has limits (`lq`,
-- migration 13). $1 the queue.
UPDATE {schema}.items SET lq = true
WHERE queue = $1 AND limit_key IS NULL AND NOT lq AND state <> 'done'
    AND EXISTS (SELECT 1 FROM {schema}.queue_limits l WHERE l.queue = $1)
