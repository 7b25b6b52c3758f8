-- Store::history. ARGV: queue, since (µs, inclusive), until (µs, exclusive).
-- Answers minute, finished, failed, dead for each minute with a count, earliest
-- first (keys as history_add.lua describes them).
local q = ARGV[1]
local h = P .. ':hi:' .. q
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. ':hm:' .. q, ARGV[2], '(' .. ARGV[3])) do
  local v = redis.call('HMGET', h, m .. ':f', m .. ':x', m .. ':d')
  local f, x, d = v[1] or '0', v[2] or '0', v[3] or '0'
  if f ~= '0' or x ~= '0' or d ~= '0' then
    out[#out + 1] = m; out[#out + 1] = f; out[#out + 1] = x; out[#out + 1] = d
  end
end
return out
