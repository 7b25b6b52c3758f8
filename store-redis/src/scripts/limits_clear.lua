-- Store::limits_clear. ARGV: queue. Removes its limits, its rate history and its
-- deferrals; answers 1 when it had limits.
ensure_layout()
local q = ARGV[1]
local had = redis.call('EXISTS', k_lim(q))
for _, key in ipairs(redis.call('SMEMBERS', k_ratekeys(q))) do
  redis.call('DEL', k_starts(q, key))
end
redis.call('DEL', k_lim(q), k_lover(q), k_lweight(q), k_defer(q), k_ratekeys(q))
redis.call('SREM', K_LIMQ, q)
-- Parked keys may open under the new limits (G16).
unpark_all(q)
redis.call('SPUBLISH', K_WAKE, '1')
return had
