-- Store::complete. ARGV: now, keep_done (0/1), then pairs id, attempt. Answers per
-- token 1 accepted, 0 lease lost (G3). An accepted item leaves its stream, whose next
-- item becomes the head (G9), and is deleted, or kept as `done` until purged.
local now = tonumber(ARGV[1])
local keep = ARGV[2] == '1'
local out = {}
-- Running-set members to remove per queue, owner-set members per owner.
local leaving = {}
local released = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local h = load_running(id)
  if not is_current(h, tonumber(ARGV[i + 1])) then
    out[#out + 1] = 0
  else
    -- unlink_running, with the running-set and owner-set removals batched below.
    local run = leaving[h.q]
    if not run then run = {}; leaving[h.q] = run end
    run[#run + 1] = id
    if h.o then
      local mine = released[h.o]
      if not mine then mine = {}; released[h.o] = mine end
      mine[#mine + 1] = id
    end
    if h.sc then scope_freed(h.sc) end
    stream_leave(h, now)
    if keep then
      redis.call('HSET', k_item(id), 's', 'done', 'ua', N(now))
      redis.call('HDEL', k_item(id), 'o', 'le')
      redis.call('ZADD', k_done(h.q), N(now), id)
    else
      -- A running item is in no index but its queue's running set and its owner's,
      -- both left after the loop.
      redis.call('DEL', k_item(id))
    end
    out[#out + 1] = 1
  end
end
for q, ids in pairs(leaving) do
  redis.call('ZREM', k_run(q), unpack(ids))
  if not keep then redis.call('ZREM', k_all(q), unpack(ids)) end
end
for o, ids in pairs(released) do redis.call('SREM', k_owner(o), unpack(ids)) end
return out
