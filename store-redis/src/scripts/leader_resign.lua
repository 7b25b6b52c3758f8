-- Store::leader_resign. ARGV: now, name, holder. Frees the lease when the caller holds
-- it unexpired, keeping the term (G13). Answers 1 when it did, else 0.
local now = tonumber(ARGV[1])
local key = k_leader(ARGV[2])
local v = redis.call('HMGET', key, 'h', 'x')
if v[1] == ARGV[3] and v[2] and tonumber(v[2]) > now then
  redis.call('HSET', key, 'h', '', 'x', N(now))
  return 1
end
return 0
