-- Store::instance_list. Answers {id, started_at, last_seen} per instance, oldest
-- registration first.
local out = {}
for _, id in ipairs(redis.call('ZRANGE', K_INST, 0, -1)) do
  local v = redis.call('HMGET', k_instance(id), 'st', 'ls')
  if v[1] then out[#out + 1] = {id, v[1], v[2]} end
end
return out
