-- Store::history_add. ARGV: keep_from (µs: the newest minute added minus
-- HISTORY_KEEP), then per entry: queue, minute (µs), finished, failed, dead.
-- Per queue, `{p}:hi:<queue>` (hash: `<minute>:f`, `:x`, `:d`, the sums) and
-- `{p}:hm:<queue>` (zset: the minutes it holds, by minute). Minutes older than
-- keep_from go, at most 1000 per queue per call.
local keep_from = ARGV[1]
local touched = {}
for i = 2, #ARGV, 5 do
  local q, m = ARGV[i], ARGV[i + 1]
  local h = P .. ':hi:' .. q
  redis.call('ZADD', P .. ':hm:' .. q, m, m)
  redis.call('HINCRBY', h, m .. ':f', ARGV[i + 2])
  redis.call('HINCRBY', h, m .. ':x', ARGV[i + 3])
  redis.call('HINCRBY', h, m .. ':d', ARGV[i + 4])
  if not touched[q] then touched[q] = true; touched[#touched + 1] = q end
end
for _, q in ipairs(touched) do
  local hm = P .. ':hm:' .. q
  local old = redis.call('ZRANGEBYSCORE', hm, '-inf', '(' .. keep_from, 'LIMIT', 0, 1000)
  for _, m in ipairs(old) do
    redis.call('HDEL', P .. ':hi:' .. q, m .. ':f', m .. ':x', m .. ':d')
  end
  if #old > 0 then redis.call('ZREM', hm, unpack(old)) end
end
return 1
