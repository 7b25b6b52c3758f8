-- Store::limits_wait. ARGV: now, queue count, queues. Answers the soonest instant
-- after now (µs) at which time alone may let a claim start an item the queues' limits
-- hold back: a deferral's end, the first start a full rate window lets go of, and,
-- under a concurrency limit, the next expiry of a running lease; or nil. It may be
-- early (one empty poll), never late. Reads only.
local now = tonumber(ARGV[1])
local at = nil
local function soonest(t)
  if t and t > now and (not at or t < at) then at = t end
end
-- When the window of `per` ending now holds `starts` starts or more: the instant the
-- oldest of them leaves it.
local function rate_end(q, key, starts, per)
  local from = '(' .. N(now - per)
  if redis.call('ZCOUNT', k_starts(q, key), from, '+inf') < starts then return nil end
  local first = redis.call('ZRANGEBYSCORE', k_starts(q, key), from, '+inf', 'WITHSCORES',
    'LIMIT', 0, 1)
  return tonumber(first[2]) + per
end
for i = 1, tonumber(ARGV[2]) do
  local q = ARGV[2 + i]
  local df = redis.call('HGETALL', k_defer(q))
  for j = 2, #df, 2 do soonest(tonumber(df[j])) end
  local v = redis.call('HMGET', k_lim(q), 'set', 'c', 'kc', 'rs', 'rp', 'krs', 'krp')
  if v[1] then
    if v[4] then soonest(rate_end(q, '', tonumber(v[4]), tonumber(v[5]))) end
    if v[6] then
      for _, key in ipairs(redis.call('SMEMBERS', k_ratekeys(q))) do
        if key ~= '' then soonest(rate_end(q, key, tonumber(v[6]), tonumber(v[7]))) end
      end
    end
    if v[2] or v[3] or redis.call('EXISTS', k_lover(q)) == 1 then
      local first = redis.call('ZRANGE', k_run(q), 0, 0, 'WITHSCORES')
      if #first > 0 then soonest(tonumber(first[2])) end
    end
  end
end
if at then return N(at) end
return false
