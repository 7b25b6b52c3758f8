-- The ready heads of limited queues by limit key (G16), step 1: `lq` marks the items
-- of a queue with limits that have no limit key, so that the index of migration 14
-- holds every ready head of a limited queue and no head of a queue without limits
-- (their enqueues and claims pay nothing for it).
--
-- An enqueue in a schema with limits sets `lq` on its items without a key whose queue
-- has limits (`sql/limits/mark.sql`); `limits_set` sets it on the queue's unfinished
-- items (`sql/limits/mark_queue.sql`), again once every handle has seen the limits.
-- Adding the column with a constant default rewrites nothing.
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS lq boolean NOT NULL DEFAULT false;
UPDATE __SCHEMA__.items SET lq = true
WHERE limit_key IS NULL AND NOT lq AND state <> 'done'
    AND queue IN (SELECT queue FROM __SCHEMA__.queue_limits);
