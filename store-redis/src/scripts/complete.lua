-- Store::complete. ARGV: now, keep_done (0/1), then triples id, attempt, lease.
-- Answers per token 1 accepted, 0 lease lost (G3), 2 out of order: the item is behind
-- an unfinished item of its stream (G9), nothing changed. An accepted item leaves its
-- stream, whose next item becomes the head (G9), and is deleted, or kept as `done`
-- until purged. The attempt and the lease are compared as the strings the client
-- sends and the claim wrote.
local now -- a number, read from ARGV[1] only when needed
local keep = ARGV[2] == '1'
local out = {}
-- The running-set members to remove, per queue, removed after the loop; a batch
-- usually names one queue, kept without a table.
local q1, run1
local leaving
local item = P .. ':i:'
-- Per queue, whether it has parked limit keys (read once per call).
local parked = {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local key = item .. id
  -- The fence reads `s` alone: its attempt, mark, queue and lease (lib.lua's item
  -- layout). The scope and stream are read only when the mark says there may be
  -- some; an `s` of layout 3 has no mark or queue, so both are read with the queue,
  -- and one of layout 4 or before has no lease (NO_LEASE).
  local s = redis.call('HGET', key, 's')
  local a, mark, q, lid
  if s then
    a, mark, q, lid = string.match(s, '^running (%d+) %d+ %-?%d+ ([%+%-]) (%S+) (%x+)$')
    if not a then
      a, mark, q = string.match(s, '^running (%d+) %d+ %-?%d+ ([%+%-]) (%S+)$')
      if not a then a = string.match(s, '^running (%d+) ') end
    end
  end
  local current = a == ARGV[i + 1] and (lid or NO_LEASE) == ARGV[i + 2]
  local sc, st, lk
  if current and mark ~= '-' then
    local v = redis.call('HMGET', key, 'q', 'sc', 'st', 'lk')
    q, sc, st, lk = v[1], v[2] or nil, v[3] or nil, v[4] or nil
  end
  if not current then
    out[#out + 1] = 0
  elseif st and not is_stream_head({id = id, st = st}) then
    -- G9: behind an unfinished item of its stream (the rest of a run); nothing
    -- changes, the lease stays current.
    out[#out + 1] = 2
  else
    -- unlink_running, with the running-set removals batched below.
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
    if sc then scope_freed(sc) end
    if lk then
      -- G16: out of its key's running set; a parked key comes back (lib.lua's
      -- key_left), looked for only in a queue that has parked keys.
      redis.call('SREM', k_krun(q, lk), id)
      local any = parked[q]
      if any == nil then
        any = redis.call('EXISTS', k_park(q)) == 1
        parked[q] = any
      end
      if any then unpark(q, lk) end
    end
    if st then
      now = now or tonumber(ARGV[1])
      stream_leave({id = id, st = st}, now)
    end
    if keep then
      local h = load(id)
      h.s, h.ua = 'done', tonumber(ARGV[1])
      redis.call('HSET', key, 's', state_of(h))
      redis.call('HDEL', key, 'l')
      redis.call('ZADD', k_done(q), ARGV[1], id)
    else
      -- A running item is in no index but its queue's running set, left after the
      -- loop, and the queue's listing index.
      redis.call('DEL', key)
    end
    out[#out + 1] = 1
  end
end
if q1 then
  redis.call('ZREM', k_run(q1), unpack(run1))
  if not keep then redis.call('ZREM', k_all(q1), unpack(run1)) end
  if not leaving then slots_freed({[q1] = true}) end
end
if leaving then
  for q, ids in pairs(leaving) do
    redis.call('ZREM', k_run(q), unpack(ids))
    if not keep then redis.call('ZREM', k_all(q), unpack(ids)) end
  end
  if q1 then leaving[q1] = true end
  slots_freed(leaving)
end
return out
