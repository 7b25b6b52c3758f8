-- Store::purge. ARGV: now, keep_done_for (µs), limit. Deletes kept finished items
-- older than keep_done_for, oldest first, and dedup keys past their window, earliest
-- expiry first, up to `limit` of each (G11). Answers {items, dedup keys}.
local now = tonumber(ARGV[1])
local cutoff = now - tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local cands = {}
for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
  local ids = redis.call('ZRANGEBYSCORE', k_done(q), '-inf', N(cutoff), 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #ids, 2 do cands[#cands + 1] = {tonumber(ids[i + 1]), ids[i], q} end
end
table.sort(cands, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end)
local items = 0
for i = 1, math.min(limit, #cands) do
  local h = load(cands[i][2])
  if h and h.s == 'done' then delete(h) else redis.call('ZREM', k_done(cands[i][3]), cands[i][2]) end
  items = items + 1
end
local keys = 0
local entries = redis.call('ZRANGEBYSCORE', K_DEDUP_EXP, '-inf', N(now), 'LIMIT', 0, limit)
for _, entry in ipairs(entries) do
  local q, key = string.match(entry, '^([^%z]*)%z(.*)$')
  if q then
    local dk = k_dedup(q, key)
    local v = redis.call('GET', dk)
    local exp = v and tonumber(string.match(v, ' (%-?%d+)$'))
    if not v or (exp and exp <= now) then redis.call('DEL', dk) end
  end
  redis.call('ZREM', K_DEDUP_EXP, entry)
  keys = keys + 1
end
return {items, keys}
