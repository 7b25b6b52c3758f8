-- Store::renew. ARGV: now, lease (µs), then triples id, attempt, lease id. Answers per token
-- {1, expires_at, renewals} renewed, {2, limit} at the cap (G4), {0} lease lost (G3).
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local h = load(id)
  if not is_current(h, tonumber(ARGV[i + 1]), ARGV[i + 2]) then
    out[#out + 1] = {0}
  elseif h.rn >= h.mr then
    out[#out + 1] = {2, h.mr}
  else
    local expires = now + lease
    h.rn, h.ua = h.rn + 1, now
    redis.call('HSET', k_item(id), 's', state_of(h), 'l', h.o .. ' ' .. N(expires))
    redis.call('ZADD', k_run(h.q), N(expires), id)
    lower_due(h.q, expires)
    out[#out + 1] = {1, expires, h.rn}
  end
end
return out
