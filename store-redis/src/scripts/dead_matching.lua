-- The dead items of a queue that went dead at or before a time, earliest first, at most
-- a limit. ARGV: queue, dead before, limit. Reads the queue's dead set, which only
-- dead items are in.
local q, before, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local c = {}
for _, id in ipairs(redis.call('SMEMBERS', k_dead(q))) do
  local v = redis.call('HMGET', k_item(id), 's', 'n')
  local ua = v[1] and tonumber(word(v[1], 4))
  if ua and ua <= before then c[#c + 1] = {ua, tonumber(word(v[2], 8)), id} end
end
table.sort(c, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end)
local out = {}
for i = 1, math.min(limit, #c) do out[i] = c[i][3] end
return out
