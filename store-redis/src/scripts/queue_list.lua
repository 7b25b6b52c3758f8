-- Store::queue_list. Answers the names of every queue with a stored item, and every
-- paused queue, sorted.
ensure_layout()
local seen = {}
local out = {}
for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
  if redis.call('ZCARD', k_all(q)) > 0 then seen[q] = true; out[#out + 1] = q end
end
for _, q in ipairs(redis.call('HKEYS', K_PAUSED)) do
  if not seen[q] then out[#out + 1] = q end
end
table.sort(out)
return out
