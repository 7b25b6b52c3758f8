-- Store::complete. ARGV: now, keep_done (0/1), then pairs id, attempt. Answers per
-- token 1 accepted, 0 lease lost (G3). An accepted item leaves its stream, whose next
-- item becomes the head (G9), and is deleted, or kept as `done` until purged. The
-- attempt is compared as the decimal string the client sends and the claim wrote.
local now -- a number, read from ARGV[1] only when needed
local keep = ARGV[2] == '1'
local out = {}
-- The running-set members to remove, per queue, and the owner-set members, per owner,
-- removed after the loop; a batch usually names one queue and one owner, kept
-- without a table.
local q1, run1, o1, mine1
local leaving, released
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local h = load_running(id)
  if not h or h.s ~= 'running' or h.a ~= ARGV[i + 1] then
    out[#out + 1] = 0
  else
    -- unlink_running, with the running-set and owner-set removals batched below.
    if h.q == q1 then
      run1[#run1 + 1] = id
    elseif not q1 then
      q1, run1 = h.q, {id}
    else
      leaving = leaving or {}
      local run = leaving[h.q]
      if not run then run = {}; leaving[h.q] = run end
      run[#run + 1] = id
    end
    if not h.o then
      -- (a running item always has an owner)
    elseif h.o == o1 then
      mine1[#mine1 + 1] = id
    elseif not o1 then
      o1, mine1 = h.o, {id}
    else
      released = released or {}
      local mine = released[h.o]
      if not mine then mine = {}; released[h.o] = mine end
      mine[#mine + 1] = id
    end
    if h.sc then scope_freed(h.sc) end
    if h.st then
      now = now or tonumber(ARGV[1])
      stream_leave(h, now)
    end
    if keep then
      h.s, h.ua = 'done', ARGV[1]
      redis.call('HSET', k_item(id), 's', state_of(h))
      redis.call('HDEL', k_item(id), 'l')
      redis.call('ZADD', k_done(h.q), ARGV[1], id)
    else
      -- A running item is in no index but its queue's running set and its owner's,
      -- both left after the loop.
      redis.call('DEL', k_item(id))
    end
    out[#out + 1] = 1
  end
end
if q1 then redis.call('ZREM', k_run(q1), unpack(run1)) end
if leaving then
  for q, ids in pairs(leaving) do redis.call('ZREM', k_run(q), unpack(ids)) end
end
if o1 then redis.call('SREM', k_owner(o1), unpack(mine1)) end
if released then
  for o, ids in pairs(released) do redis.call('SREM', k_owner(o), unpack(ids)) end
end
return out
