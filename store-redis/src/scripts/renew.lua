-- Store::renew. ARGV: now, lease (µs), stride (3, or 4 when the renewal reports
-- progress), then per token id, attempt, lease id (and with stride 4 its progress, ''
-- for none). Answers per token {1, expires_at, renewals} renewed, {2, limit} at the cap
-- (G4), {0} lease lost (G3). Progress is written on the renewed item only, in the same
-- write as its lease, so a superseded lease's progress is never kept.
local now = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local stride = tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV, stride do
  local id = ARGV[i]
  local h = load(id)
  if not is_current(h, tonumber(ARGV[i + 1]), ARGV[i + 2]) then
    out[#out + 1] = {0}
  elseif h.rn >= h.mr then
    out[#out + 1] = {2, h.mr}
  else
    local expires = now + lease
    h.rn, h.ua = h.rn + 1, now
    local progress = stride == 4 and ARGV[i + 3] or ''
    if progress ~= '' then
      redis.call('HSET', k_item(id), 's', state_of(h), 'l', h.o .. ' ' .. N(expires),
        'pg', progress)
    else
      redis.call('HSET', k_item(id), 's', state_of(h), 'l', h.o .. ' ' .. N(expires))
    end
    redis.call('ZADD', k_run(h.q), N(expires), id)
    lower_due(h.q, expires)
    out[#out + 1] = {1, expires, h.rn}
  end
end
return out
