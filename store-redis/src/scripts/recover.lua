-- Store::recover_expired. ARGV: now, limit. Recovers up to `limit` expired leases in
-- any queue, oldest expiry first (G2, G6). Answers {requeued, dead}.
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cands = {}
for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
  local ids = redis.call('ZRANGEBYSCORE', k_run(q), '-inf', N(now), 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #ids, 2 do cands[#cands + 1] = {tonumber(ids[i + 1]), ids[i]} end
end
table.sort(cands, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end)
local requeued, dead = 0, 0
for i = 1, math.min(limit, #cands) do
  local r = recover_one(cands[i][2], now)
  if r == 'requeued' then requeued = requeued + 1 elseif r == 'dead' then dead = dead + 1 end
end
return {requeued, dead}
