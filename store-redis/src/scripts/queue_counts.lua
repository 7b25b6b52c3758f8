-- Store::queue_counts. ARGV: now, queue. Answers {ready and due, scheduled, running,
-- dead, done}, from index sizes; nothing is scanned. A ready item is
-- scheduled when its run_at is after `now`: such items are the scheduled candidates
-- and the items held behind a stream head, both sorted sets by run_at.
local now = tonumber(ARGV[1])
local q = ARGV[2]
ensure_layout()
local all = redis.call('ZCARD', k_readyat(q))
local later = '(' .. N(now)
local scheduled = redis.call('ZCOUNT', k_sched(q), later, '+inf')
  + redis.call('ZCOUNT', k_hold(q), later, '+inf')
-- The oldest due item, and the pause flag.
local first = redis.call('ZRANGE', k_readyat(q), 0, 0, 'WITHSCORES')
local has_oldest, oldest = 0, 0
if first[1] and tonumber(first[2]) <= now then has_oldest, oldest = 1, tonumber(first[2]) end
return {all - scheduled, scheduled, redis.call('ZCARD', k_run(q)), redis.call('ZCARD', k_dead(q)),
  redis.call('ZCARD', k_done(q)), redis.call('HEXISTS', K_PAUSED, q), has_oldest, oldest}
