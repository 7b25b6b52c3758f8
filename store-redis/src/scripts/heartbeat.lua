-- Store::instance_heartbeat. ARGV: now, instance. Registers the instance on its first
-- call and records the heartbeat on every call (G12).
local now = tonumber(ARGV[1])
local id = ARGV[2]
local key = k_instance(id)
if redis.call('EXISTS', key) == 0 then
  local order = redis.call('INCR', K_INST_SEQ)
  redis.call('HSET', key, 'st', N(now), 'ls', N(now))
  redis.call('ZADD', K_INST, N(order), id)
  redis.call('ZADD', K_INST_IDS, 0, id)
else
  redis.call('HSET', key, 'ls', N(now))
end
redis.call('ZADD', K_INST_SEEN, N(now), id)
return 1
