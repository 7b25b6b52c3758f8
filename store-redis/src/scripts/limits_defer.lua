-- Store::limits_defer. ARGV: queue, limit key ('' the whole queue), until (µs). No
-- claim starts an item of the key before `until`; an earlier deferral that ends
-- later stays.
ensure_layout()
local q, key, til = ARGV[1], ARGV[2], tonumber(ARGV[3])
local old = redis.call('HGET', k_defer(q), key)
if not old or tonumber(old) < til then redis.call('HSET', k_defer(q), key, N(til)) end
return 1
