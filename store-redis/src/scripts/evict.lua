-- Store::instance_evict_stale. ARGV: now, stale_after (µs). Evicts every instance
-- whose last heartbeat is at least stale_after old, oldest registration first, and
-- releases its running items at once, a stall each (G12). Answers {released, ids...}.
local now = tonumber(ARGV[1])
local stale = redis.call('ZRANGEBYSCORE', K_INST_SEEN, '-inf', N(now - tonumber(ARGV[2])))
local ordered = {}
for _, id in ipairs(stale) do
  ordered[#ordered + 1] = {tonumber(redis.call('ZSCORE', K_INST, id) or 0), id}
end
table.sort(ordered, function(x, y) return x[1] < y[1] end)
local out = {0}
local released = 0
for _, e in ipairs(ordered) do
  local id = e[2]
  redis.call('DEL', k_instance(id))
  redis.call('ZREM', K_INST, id)
  redis.call('ZREM', K_INST_SEEN, id)
  redis.call('ZREM', K_INST_IDS, id)
  unpin_owner(id)
  released = released + release_owner(id, now)
  out[#out + 1] = id
end
out[1] = released
return out
