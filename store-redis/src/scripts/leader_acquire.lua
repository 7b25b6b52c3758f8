-- Store::leader_acquire. ARGV: now, name, holder, lease (µs). Free or expired: the
-- caller leads with a greater term; held by the caller: extended, same term; held by
-- another: follower (G13). Answers {1, term, expires_at} or {0, holder, term, expires_at}.
local now = tonumber(ARGV[1])
local key = k_leader(ARGV[2])
local holder = ARGV[3]
local expires = now + tonumber(ARGV[4])
local v = redis.call('HMGET', key, 'h', 't', 'x')
local term = tonumber(v[2] or '0')
if v[3] and tonumber(v[3]) > now and v[1] and v[1] ~= '' then
  if v[1] ~= holder then return {0, v[1], term, tonumber(v[3])} end
  redis.call('HSET', key, 'x', N(expires))
  return {1, term, expires}
end
term = term + 1
redis.call('HSET', key, 'h', holder, 't', N(term), 'x', N(expires))
return {1, term, expires}
