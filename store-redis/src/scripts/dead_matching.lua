-- The dead items of a queue that went dead at or before a time, earliest first (equal
-- times in enqueue order), at most a limit. ARGV: queue, dead before, limit. Reads
-- only the items it answers, from the queue's dead set sorted by when they died.
ensure_layout()
local q, before, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', k_dead(q), '-inf', before, 'LIMIT', 0, limit)) do
  out[#out + 1] = dead_member_id(m)
end
return out
