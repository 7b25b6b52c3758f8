-- Store::limits_list. Answers {queue, limits_of(queue), ...} for every queue with
-- limits, by name.
local qs = redis.call('SMEMBERS', K_LIMQ)
table.sort(qs)
local out = {}
for _, q in ipairs(qs) do
  local l = limits_of(q)
  if l then
    out[#out + 1] = q
    out[#out + 1] = l
  end
end
return out
