-- Store::queue_pause and Store::queue_resume. ARGV: now, queue, 1 (pause) or 0
-- (resume). Answers 1 when the flag changed.
local now, q = ARGV[1], ARGV[2]
if ARGV[3] == '1' then return redis.call('HSETNX', K_PAUSED, q, now) end
return redis.call('HDEL', K_PAUSED, q)
