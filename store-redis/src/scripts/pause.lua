-- Store::queue_pause and Store::queue_resume. ARGV: now, queue, 1 (pause) or 0
-- (resume). Answers 1 when the flag changed.
local now, q = ARGV[1], ARGV[2]
-- The flag beside the queue's due bound follows (lib.lua's write_due).
if ARGV[3] == '1' then
  redis.call('HSET', k_count(q), 'p', '1')
  return redis.call('HSETNX', K_PAUSED, q, now)
end
redis.call('HSET', k_count(q), 'p', '0')
return redis.call('HDEL', K_PAUSED, q)
