-- Store::leader_get. ARGV: now, name. Reads only: answers {holder, term, expires_at}
-- of a live lease (expires_at > now, a holder set), else an empty list (G13).
local now = tonumber(ARGV[1])
local v = redis.call('HMGET', k_leader(ARGV[2]), 'h', 't', 'x')
if v[1] and v[1] ~= '' and v[3] and tonumber(v[3]) > now then
  return {v[1], tonumber(v[2] or '0'), tonumber(v[3])}
end
return {}
