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
local item = P .. ':i:'
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local key = item .. id
  -- One HMGET of the fields a finalize needs, never the payload; the fence compares
  -- the attempt with the token's as written.
  local v = redis.call('HMGET', key, 's', 'q', 'l', 'sc', 'st')
  local a = v[1] and string.match(v[1], '^running (%d+) ')
  if a ~= ARGV[i + 1] then
    out[#out + 1] = 0
  else
    local q, o, sc, st = v[2], v[3] and string.match(v[3], '^(%S+)'), v[4], v[5]
    -- unlink_running, with the running-set and owner-set removals batched below.
    if q == q1 then
      run1[#run1 + 1] = id
    elseif not q1 then
      q1, run1 = q, {id}
    else
      leaving = leaving or {}
      local run = leaving[q]
      if not run then run = {}; leaving[q] = run end
      run[#run + 1] = id
    end
    if not o then
      -- (a running item always has an owner)
    elseif o == o1 then
      mine1[#mine1 + 1] = id
    elseif not o1 then
      o1, mine1 = o, {id}
    else
      released = released or {}
      local mine = released[o]
      if not mine then mine = {}; released[o] = mine end
      mine[#mine + 1] = id
    end
    if sc then scope_freed(sc) end
    if st then
      now = now or tonumber(ARGV[1])
      stream_leave({id = id, st = st}, now)
    end
    if keep then
      local h = load_running(id)
      h.s, h.ua = 'done', ARGV[1]
      redis.call('HSET', key, 's', state_of(h))
      redis.call('HDEL', key, 'l')
      redis.call('ZADD', k_done(q), ARGV[1], id)
    else
      -- A running item is in no index but its queue's running set and its owner's,
      -- both left after the loop.
      redis.call('DEL', key)
    end
    out[#out + 1] = 1
  end
end
if q1 then
  redis.call('ZREM', k_run(q1), unpack(run1))
  if not keep then redis.call('ZREM', k_all(q1), unpack(run1)) end
end
if leaving then
  for q, ids in pairs(leaving) do
    redis.call('ZREM', k_run(q), unpack(ids))
    if not keep then redis.call('ZREM', k_all(q), unpack(ids)) end
  end
end
if o1 then redis.call('SREM', k_owner(o1), unpack(mine1)) end
if released then
  for o, ids in pairs(released) do redis.call('SREM', k_owner(o), unpack(ids)) end
end
return out
