-- Store::item_list. ARGV: now, queue, state (ready, scheduled, running, dead), order
-- (asc, desc), limit, after (a seq, or '' from the start). Walks the queue's items by
-- seq (`k_all`) from the cursor, keeping those in the state, and stops at `limit`
-- matches or after looking at a bounded number of entries, so one call never walks
-- the whole queue. Answers {next seq or '', then per item its id and HGETALL list}.
ensure_layout()
local now = tonumber(ARGV[1])
local q, state, asc, limit = ARGV[2], ARGV[3], ARGV[4] == 'asc', tonumber(ARGV[5])
local after = ARGV[6]
local want_s = state
if state == 'scheduled' then want_s = 'ready' end
local budget = limit * 20 + 200
local out = {''}
local found = 0
local last = nil
local key = k_all(q)
local pos = after
while budget > 0 do
  local r
  if asc then
    local lo = '-inf'
    if pos ~= '' then lo = '(' .. pos end
    r = redis.call('ZRANGE', key, lo, '+inf', 'BYSCORE', 'LIMIT', 0, 200, 'WITHSCORES')
  else
    local hi = '+inf'
    if pos ~= '' then hi = '(' .. pos end
    r = redis.call('ZRANGE', key, hi, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 200, 'WITHSCORES')
  end
  if #r == 0 then return out end
  for i = 1, #r, 2 do
    if found >= limit or budget <= 0 then
      out[1] = last
      return out
    end
    budget = budget - 1
    local id = r[i]
    last = r[i + 1]
    pos = last
    local v = redis.call('HMGET', k_item(id), 's', 'n')
    local ok = v[1] and word(v[1], 1) == want_s
    if ok and state == 'ready' then ok = tonumber(word(v[2], 2)) <= now end
    if ok and state == 'scheduled' then ok = tonumber(word(v[2], 2)) > now end
    if ok then
      found = found + 1
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGETALL', k_item(id))
    end
  end
end
out[1] = last or ''
return out
