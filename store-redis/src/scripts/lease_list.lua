-- Store::lease_list. ARGV: queue, limit, after expiry ('' from the start), after id.
-- Walks the queue's running set (by lease expiry, then id) from the cursor. Answers
-- {more (0/1), then per lease: id, attempt, owner, expiry, renewals, max renewals,
-- lease id, limit key ('' when none: G16)}.
local q, limit = ARGV[1], tonumber(ARGV[2])
local at, after_id = ARGV[3], ARGV[4]
local lo = '-inf'
if at ~= '' then lo = at end
local out = {0}
local n = 0
local offset = 0
while true do
  local r = redis.call('ZRANGE', k_run(q), lo, '+inf', 'BYSCORE', 'LIMIT', offset, 200, 'WITHSCORES')
  if #r == 0 then return out end
  offset = offset + #r / 2
  for i = 1, #r, 2 do
    local id, score = r[i], r[i + 1]
    if at == '' or score ~= at or id > after_id then
      if n >= limit then
        out[1] = 1
        return out
      end
      local v = redis.call('HMGET', k_item(id), 's', 'n', 'l', 'lk')
      if v[1] and v[3] then
        n = n + 1
        out[#out + 1] = id
        out[#out + 1] = word(v[1], 2)
        out[#out + 1] = word(v[3], 1)
        out[#out + 1] = score
        out[#out + 1] = word(v[1], 3)
        out[#out + 1] = word(v[2], 6)
        out[#out + 1] = lease_of(v[1]) or NO_LEASE
        out[#out + 1] = v[4] or ''
      end
    end
  end
end
