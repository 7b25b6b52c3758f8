-- Store::claim. ARGV: now, owner, limit, the lease's expiry (now + lease, µs),
-- partitions (0: not partitioned), queue count, queues..., the most items of one
-- stream run, the lease id the client minted for this claim (16 hex digits; G3). Recovers the queues' expired leases and moves their due scheduled
-- candidates first when their due bound says there may be some (G2, G6, G7), then
-- takes candidates by (priority, run_at, seq) across the queues (G8). Every entry of
-- a `ready` zset is claimable (G9, G10 are kept by the write path), so a claim of B
-- items reads about B entries. Answers one flat array: each claimed item, in claim
-- order, as it was before the claim less what the claim overwrites, as four values
-- and perhaps a fifth (rows.rs decodes them; no table of its own per item, which
-- would cost the server and the client an array each):
--   id, attempt, payload, n: the token, and the fields a lease needs that the caller
--     does not know (`n` as stored, lib.lua's item layout); then
--   {queue, stream, scope, dedup key, last error} (false for an absent field), unless
--     the claim named one queue and the item has no stream, scope, dedup key or last
--     error.
--
-- Partitioned (G14): the owner must be registered (else the error NOTFOUND, nothing
-- written); every due candidate is looked at, the scoped ones waiting behind the first
-- of a free scope included, and only the owner's share is taken: items of a stream
-- pinned to it, or unpinned items whose partition its rank takes. Claiming an item of
-- an unpinned stream pins the stream. This walks the queues' due candidates, so it
-- costs O(n) where an ordinary claim costs O(B).

-- The common claim first, on its own path: one queue, no partitions, no stream runs.
-- The first `limit` members of `ready` are exactly the items to take; no claim of one
-- of them changes the queue's other members (a scope has at most one candidate per
-- queue). The same steps as the general path below, without its tables of queues.
-- A queue with limits, a deferral, candidates of a limit key or fair shares (G16,
-- G17, G18) takes the general path.
local run_arg = ARGV[8]
if ARGV[5] == '0' and ARGV[6] == '1'
  and (run_arg == '1' or run_arg == nil or tonumber(run_arg) <= 1)
  and redis.call('EXISTS', k_lim(ARGV[7]), k_defer(ARGV[7]), k_kqueue(ARGV[7]),
    k_fair(ARGV[7])) == 0 then
  local q = ARGV[7]
  local due, rewrite, paused = catch_up(q, tonumber(ARGV[1]))
  local out = {}
  if paused ~= '1' then
    local expires_n = ARGV[4]
    -- What a claimed item's `s` ends with, without and with the mark.
    local lease = ' ' .. ARGV[9]
    local plain = ' 0 ' .. ARGV[1] .. ' - ' .. q .. lease
    local marked = ' 0 ' .. ARGV[1] .. ' + ' .. q .. lease
    local lease_field = ARGV[2] .. ' ' .. expires_n
    local rk = k_ready(q)
    -- The first `limit` members. ZPOPMIN answers each one's score, formatted as a
    -- double for the script to parse and drop; for ten members or more (a limit of
    -- two digits), reading them without scores and cutting them off by rank (one
    -- call more) costs less. The limit goes on as the string it came as: a Lua number
    -- passed to redis.call is formatted with sprintf.
    local popped, step = nil, 1
    if #ARGV[3] == 1 then
      popped, step = redis.call('ZPOPMIN', rk, ARGV[3]), 2
    else
      popped = redis.call('ZRANGE', rk, '0', N(tonumber(ARGV[3]) - 1))
      if #popped > 0 then redis.call('ZREMRANGEBYRANK', rk, '0', N(#popped - 1)) end
    end
    local run, ids = {}, {}
    local item = P .. ':i:'
    for i = 1, #popped, step do
      local m = popped[i]
      local id = string.sub(m, 33)
      local key = item .. id
      local v = redis.call('HMGET', key, 's', 'pl', 'n')
      local a, mark = ready_attempt(v[1])
      if a then
        local x = mark ~= '-' and redis.call('HMGET', key, 'st', 'sc', 'dk', 'e', 'lk') or nil
        local tail = plain
        if x and (x[1] or x[2] or x[3] or x[4] or x[5]) then tail = marked else x = nil end
        redis.call('HSET', key, 's', 'running ' .. next_attempt(a) .. tail, 'l', lease_field)
        -- A scoped item may have a limit key (the others wait in their key's set and
        -- take the general path): it holds a slot of its key.
        if x and x[5] then redis.call('SADD', k_krun(q, x[5]), id) end
        run[#run + 1] = expires_n
        run[#run + 1] = id
        ids[#ids + 1] = id
        local n = #out
        out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, a, v[2], v[3]
        if x then
          if x[2] then scope_taken(x[2], q, m, id) end
          out[n + 5] = {q, x[1], x[2], x[3], x[4]}
        end
      end
    end
    if #ids > 0 then
      redis.call('ZADD', k_run(q), unpack(run))
      redis.call('ZREM', k_readyat(q), unpack(ids))
      local expires = tonumber(expires_n)
      if expires < due then due, rewrite = expires, true end
    end
  end
  if rewrite then write_due(q, due, paused) end
  return out
end

local now = tonumber(ARGV[1])
local owner = ARGV[2]
local expires_n = ARGV[4]
local expires = tonumber(expires_n)
local partitions = tonumber(ARGV[5])
local nq = tonumber(ARGV[6])
local queues = {}
local in_queues = {}
for i = 1, nq do queues[i] = ARGV[6 + i]; in_queues[ARGV[6 + i]] = true end
-- G9: most items of one stream run (1: heads only), after the queues.
local run_max = tonumber(ARGV[7 + nq] or '1')
-- G3: the lease id, after the run.
local lease_word = ' ' .. ARGV[8 + nq]
local run_limit = tonumber(ARGV[3])
local rank, live
if partitions > 0 then
  rank = redis.call('ZRANK', K_INST_IDS, owner)
  if not rank then return redis.error_reply('NOTFOUND ' .. owner) end
  live = redis.call('ZCARD', K_INST_IDS)
end
-- The key sets of layout 6 are relied on below: a store an earlier layout wrote is
-- upgraded first (lib.lua's ensure_layout). One that has no layout yet was written
-- by this one, or before limits existed.
local layout = redis.call('GET', K_LAYOUT)
if layout and layout ~= LAYOUT then ensure_layout() end
-- Per queue, its due bound, whether it is to be written and its pause flag (lib.lua's
-- catch_up).
local dues, rewrite, paused = {}, {}, {}
for _, q in ipairs(queues) do dues[q], rewrite[q], paused[q] = catch_up(q, now) end
-- A paused queue's items are not claimed; its expired leases were recovered above.
local open = {}
for _, q in ipairs(queues) do
  if paused[q] ~= '1' then open[#open + 1] = q end
end
queues = open
nq = #queues

-- G16, G17: the gate of each queue with limits or a deferral, loaded once per call.
-- Every count is read here, in the same atomic step as the claim: a queue's running
-- items are its running set `l` (a slot is a lease), a key's are its running set
-- `kl`, and a rate's starts are its `rs` zset's entries of the last period. The claim
-- adds what it takes as it goes.
local gates = {}
local any_gate = false
-- Queues with candidates of a limit key (layout 6's key sets): a claim of one of them
-- puts the key's next candidate in `ready`.
local keyed = {}
-- The starts of `key` ('' the queue) in the window of `per` ending now; older ones go.
local function window(q, key, per)
  local z = k_starts(q, key)
  redis.call('ZREMRANGEBYSCORE', z, '-inf', N(now - per))
  return redis.call('ZCARD', z)
end
for _, q in ipairs(queues) do
  local e = redis.call('EXISTS', k_lim(q), k_defer(q))
  if redis.call('EXISTS', k_kqueue(q)) == 1 then
    keyed[q] = true
    any_gate = true
  end
  if e > 0 then
    local v = redis.call('HMGET', k_lim(q), 'c', 'kc', 'rs', 'rp', 'krs', 'krp')
    local g = {q = q, defer = {}, keys = {}}
    g.c = v[1] and tonumber(v[1])
    g.kc = v[2] and tonumber(v[2])
    g.rs, g.rp = v[3] and tonumber(v[3]), v[4] and tonumber(v[4])
    g.krs, g.krp = v[5] and tonumber(v[5]), v[6] and tonumber(v[6])
    g.overrides = redis.call('EXISTS', k_lover(q)) == 1
    local df = redis.call('HGETALL', k_defer(q))
    for i = 1, #df, 2 do
      local t = tonumber(df[i + 1])
      if t > now then g.defer[df[i]] = t end
    end
    g.running = g.c and redis.call('ZCARD', k_run(q)) or 0
    g.starts = g.rs and window(q, '', g.rp) or 0
    gates[q] = g
    any_gate = true
  end
  -- Parked keys whose time has come (a rate window's or a deferral's end) go back.
  if keyed[q] then
    for _, key in ipairs(redis.call('ZRANGEBYSCORE', k_park(q), '-inf', N(now))) do
      unpark(q, key)
    end
  end
end
-- The gate's verdict on a candidate of limit key lk (false: none): 0 claim it, 1 its
-- key is at a bound (pass it over), 2 the queue is (claim nothing more from it).
local function admit(g, lk)
  if g.defer[''] then return 2 end
  if g.c and g.running >= g.c then return 2 end
  if g.rs and g.starts >= g.rs then return 2 end
  if not lk then return 0 end
  local k = g.keys[lk]
  if not k then
    k = {deferred = g.defer[lk], running = 0, starts = 0}
    local o = g.overrides and redis.call('HGET', k_lover(g.q), lk)
    k.limit = (o and tonumber(o)) or g.kc
    if k.limit then k.running = redis.call('SCARD', k_krun(g.q, lk)) end
    if g.krs then k.starts = window(g.q, lk, g.krp) end
    g.keys[lk] = k
  end
  if k.deferred or (k.limit and k.running >= k.limit) or (g.krs and k.starts >= g.krs) then
    return 1
  end
  return 0
end
-- When time alone may open key lk of gate g, which admit found at a bound: its
-- deferral's end, the instant its rate window lets go of its oldest start, or NEVER
-- (only a slot a lease gives back opens it, and that unparks it).
local function key_wakes(g, lk)
  local k = g.keys[lk]
  local at = NEVER
  if k.deferred then at = k.deferred end
  if g.krs and k.starts >= g.krs then
    local first = redis.call('ZRANGE', k_starts(g.q, lk), 0, 0, 'WITHSCORES')
    if first[2] then
      local t = tonumber(first[2]) + g.krp
      if t < at then at = t end
    end
  end
  return at
end
-- Parks limit key lk of queue q (its first candidate `m` is in `ready`).
local function park(g, lk, m)
  redis.call('ZREM', k_ready(g.q), m)
  redis.call('ZADD', k_park(g.q), N(key_wakes(g, lk)), lk)
end
-- Counts a claim of item `id` (limit key lk) the gate admitted: a slot, and a start
-- for each rate, kept one period (the member is unique per claim: the lease is).
local function charge(g, lk, id)
  local member = id .. lease_word
  g.running = g.running + 1
  if g.rs then
    g.starts = g.starts + 1
    redis.call('ZADD', k_starts(g.q, ''), N(now), member)
    redis.call('SADD', k_ratekeys(g.q), '')
  end
  if lk then
    local k = g.keys[lk]
    k.running = k.running + 1
    if g.krs then
      k.starts = k.starts + 1
      redis.call('ZADD', k_starts(g.q, lk), N(now), member)
      redis.call('SADD', k_ratekeys(g.q), lk)
    end
  end
end

-- What every claimed item's `s` ends with but for the mark and the queue, and its `l`
-- (lib.lua's item layout): the times as the client wrote them.
local claimed_tail = ' 0 ' .. ARGV[1]
local lease_field = owner .. ' ' .. expires_n
local out = {}
-- How many items `out` answers (it holds four or five values each).
local count = 0
-- Per queue, the running-set entries (score, member) to add. Written once per call
-- after the loop: one ZADD per queue.
local taken = {}
-- Per queue with fair shares, the greatest start tag claimed (G18).
local tags = {}
-- The fields of a candidate a claim reads (`pre` below): s, pl, n, then st, sc, dk,
-- e, lk.
local function fields(id)
  return redis.call('HMGET', k_item(id), 's', 'pl', 'n', 'st', 'sc', 'dk', 'e', 'lk')
end
-- Claims the candidate `m` of queue `q`, already taken out of `ready` (from_ready
-- true) or out of nothing (an item of a stream run, a partitioned claim's candidate
-- of a key's set). `pre` is what fields() read of it, or nil. Answers false when it
-- is not ready, else the key's next candidate {score, member} when one went into
-- `ready`, else true.
local function take(q, m, pre, from_ready)
  local id = member_id(m)
  local key = k_item(id)
  -- One read of the fields the answer needs and the state, which must be ready, and
  -- of the stream, scope, dedup key, last error and limit key when the mark says
  -- there may be some; the id and queue are known here. The caller applies the
  -- claim's own changes, which it knows (state, attempt + 1, owner, expiry, renewals,
  -- updated_at).
  local v = pre or redis.call('HMGET', key, 's', 'pl', 'n')
  local a, mark = ready_attempt(v[1])
  if not a then return false end
  local x = {false, false, false, false, false}
  if pre then
    x = {pre[4], pre[5], pre[6], pre[7], pre[8]}
  elseif mark ~= '-' then
    x = redis.call('HMGET', key, 'st', 'sc', 'dk', 'e', 'lk')
  end
  local lk = x[5] or nil
  local marked = x[1] or x[2] or x[3] or x[4] or lk
  redis.call('HSET', key, 's', 'running ' .. next_attempt(a) .. claimed_tail
    .. (marked and ' + ' or ' - ') .. q .. lease_word, 'l', lease_field)
  local run = taken[q]
  if not run then run = {}; taken[q] = run end
  run[#run + 1] = expires_n
  run[#run + 1] = id
  if x[2] then scope_taken(x[2], q, m, id) end
  local g = gates[q]
  if g then charge(g, lk, id) end
  local t = member_tag(m)
  if t and (not tags[q] or t > tags[q]) then tags[q] = t end
  -- The answer (see the top): the long shape's extras unless the caller named this
  -- one queue and the item has no keys; the attempt is the one before this claim.
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, a, v[2], v[3]
  if ARGV[6] ~= '1' or x[1] or x[2] or x[3] or x[4] then
    out[n + 5] = {q, x[1], x[2], x[3], x[4]}
  end
  count = count + 1
  if not lk then return true end
  -- G16: the item holds a slot of its key. A candidate of its key's set leaves it,
  -- and when it was the key's first in `ready`, the key's next candidate takes its
  -- place, or the key is parked if this claim brought it to a bound.
  redis.call('SADD', k_krun(q, lk), id)
  if x[2] then return true end
  local kk = k_kready(q, lk)
  redis.call('ZREM', kk, m)
  local nxt = redis.call('ZRANGE', kk, 0, 0, 'WITHSCORES')
  if not nxt[1] then
    redis.call('SREM', k_kqueue(q), lk)
    redis.call('ZREM', k_park(q), lk)
    return true
  end
  if not from_ready then return true end
  if g and admit(g, lk) == 1 then
    redis.call('ZADD', k_park(q), N(key_wakes(g, lk)), lk)
    return true
  end
  redis.call('ZADD', k_ready(q), nxt[2], nxt[1])
  return {tonumber(nxt[2]), nxt[1]}
end

-- The run_at, enqueue sequence and start tag in an item's `n` and `ft` fields.
local function ra_sq(n)
  local ra, sq = string.match(n, '^%-?%d+ (%-?%d+) %d+ %d+ %d+ %d+ %-?%d+ (%d+) ')
  return tonumber(ra), tonumber(sq)
end

-- G9: after the head `m` of a stream was taken, takes the ready items right behind it
-- while each is due, in a claimed queue and of a free scope, up to `run_max` items in
-- the run and the limit in all. They wait in their queue's held set, not in `ready`.
local function take_run(m)
  if run_max <= 1 or count >= run_limit then return end
  local v = redis.call('HMGET', k_item(member_id(m)), 'st', 'n')
  if not v[1] then return end
  local _, hsq = ra_sq(v[2])
  local behind = redis.call('ZRANGEBYSCORE', k_stream(v[1]), '(' .. N(hsq), '+inf',
    'LIMIT', 0, run_max - 1)
  for _, nid in ipairs(behind) do
    if count >= run_limit then break end
    local w = redis.call('HMGET', k_item(nid), 's', 'n', 'q', 'sc', 'lk', 'ft')
    if not (w[1] and string.match(w[1], '^ready ')) or not in_queues[w[3]] then break end
    local ra, sq = ra_sq(w[2])
    if ra > now then break end
    if w[4] and redis.call('EXISTS', k_scope_run(w[4])) == 1 then break end
    local g = gates[w[3]]
    if g and admit(g, w[5] or nil) ~= 0 then break end
    redis.call('ZREM', k_hold(w[3]), nid)
    if not take(w[3], order_member(ra, sq, nid, w[6] and tonumber(w[6]) or nil), nil, false) then
      break
    end
  end
end

if partitions > 0 then
  -- Every due candidate: each queue's `ready` but the firsts of limit keys, behind
  -- every free scope's first (which is in `ready`) the rest of its waiting set, and
  -- every candidate of each limit key's set.
  local limit = tonumber(ARGV[3])
  local cands = {}
  for _, q in ipairs(queues) do
    local ms = redis.call('ZRANGE', k_ready(q), 0, -1, 'WITHSCORES')
    for i = 1, #ms, 2 do
      local m = ms[i]
      local v = redis.call('HMGET', k_item(member_id(m)), 'sc', 'lk')
      local sc = v[1]
      if sc then
        cands[#cands + 1] = {tonumber(ms[i + 1]), m, q}
        local rest = redis.call('ZRANGE', k_scope_wait(sc, q), 1, -1, 'WITHSCORES')
        for j = 1, #rest, 2 do cands[#cands + 1] = {tonumber(rest[j + 1]), rest[j], q} end
      elseif not v[2] then
        cands[#cands + 1] = {tonumber(ms[i + 1]), m, q}
      end
    end
    if keyed[q] then
      for _, key in ipairs(redis.call('SMEMBERS', k_kqueue(q))) do
        local ks = redis.call('ZRANGE', k_kready(q, key), 0, -1, 'WITHSCORES')
        for j = 1, #ks, 2 do cands[#cands + 1] = {tonumber(ks[j + 1]), ks[j], q} end
      end
    end
  end
  table.sort(cands, function(x, y)
    return order_lt(x[1], member_order(x[2]), y[1], member_order(y[2]))
  end)
  -- 2^32 mod partitions, so a 63-bit hash given as two 32-bit halves needs no
  -- arithmetic beyond 2^53.
  local wrap = 4294967296 % partitions
  for _, c in ipairs(cands) do
    if count >= limit then break end
    local q, m = c[3], c[2]
    local v = fields(member_id(m))
    local st, sc, lk = v[4] or nil, v[5] or nil, v[8] or nil
    local mine = false
    if v[3] then
      local hh, hl = string.match(v[3], '(%d+) (%d+)$')
      local pinned = st and redis.call('GET', k_pin(st)) or nil
      if pinned then
        mine = pinned == owner
      else
        local p = ((tonumber(hh) % partitions) * wrap + tonumber(hl)) % partitions
        mine = p % live == rank
      end
      -- An earlier item of this batch may have taken the scope.
      local busy = sc and redis.call('EXISTS', k_scope_run(sc)) == 1
      local g = gates[q]
      if busy or (g and admit(g, lk) ~= 0) then mine = false end
      if mine then
        -- A scoped candidate behind its scope's first is in no zset but its scope's.
        local from_ready = redis.call('ZREM', k_ready(q), m) == 1
        local took = take(q, m, v, from_ready)
        if took and st then
          if not pinned then
            redis.call('SET', k_pin(st), owner)
            redis.call('SADD', k_pins(owner), st)
          end
          take_run(m)
        end
      end
    end
  end
elseif any_gate then
  -- G16, G17: a walk of the queues' `ready` sets in claim order (G8), each from a
  -- cursor read in pages. A limit key has only its first candidate in `ready`, and
  -- none while it is parked: a key found at a bound is parked (passed over, and not
  -- read again until a slot or time may open it), a queue at a bound is claimed from
  -- no more. So the walk reads about one entry per item taken and per key it parks,
  -- never a saturated key's backlog. A scoped item with a limit key stays in
  -- `ready` when its key is at a bound and is passed over.
  local PAGE = 64
  local cur = {}
  for _, q in ipairs(queues) do cur[q] = {off = 0, buf = {}, i = 1, shut = false, eof = false} end
  -- The next unjudged candidate of q, {score, member}, or nil. `off` counts the
  -- candidates passed over: the taken and parked ones left `ready`, so the next page
  -- starts there.
  local function peek(q)
    local c = cur[q]
    if c.shut then return nil end
    if c.i > #c.buf then
      if c.eof then c.shut = true; return nil end
      local ms = redis.call('ZRANGE', k_ready(q), c.off, c.off + PAGE - 1, 'WITHSCORES')
      if #ms == 0 then c.shut = true; return nil end
      c.buf, c.i = {}, 1
      c.eof = #ms < 2 * PAGE
      for j = 1, #ms, 2 do c.buf[#c.buf + 1] = {tonumber(ms[j + 1]), ms[j]} end
    end
    return c.buf[c.i]
  end
  -- A key's next candidate `e` went into q's `ready` after the cursor: it joins the
  -- unjudged page in order, or is read with a later page.
  local function joined(q, e)
    local c = cur[q]
    local last = c.buf[#c.buf]
    if last and not c.eof and not order_lt(e[1], e[2], last[1], last[2]) then return end
    local at = #c.buf + 1
    for j = c.i, #c.buf do
      if order_lt(e[1], e[2], c.buf[j][1], c.buf[j][2]) then at = j; break end
    end
    table.insert(c.buf, at, e)
  end
  while count < run_limit do
    local best, bq = nil, nil
    for _, q in ipairs(queues) do
      local e = peek(q)
      if e and (not best or order_lt(e[1], member_order(e[2]), best[1], member_order(best[2]))) then
        best, bq = e, q
      end
    end
    if not best then break end
    local c = cur[bq]
    c.i = c.i + 1
    local g = gates[bq]
    local m = best[2]
    local v = fields(member_id(m))
    local lk = v[8] or nil
    local verdict = g and admit(g, lk) or 0
    if verdict == 2 then
      c.shut = true
    elseif verdict == 1 then
      if v[5] then c.off = c.off + 1 else park(g, lk, m) end
    elseif redis.call('ZREM', k_ready(bq), m) == 1 then
      local took = take(bq, m, v, true)
      if took then
        if type(took) == 'table' then joined(bq, took) end
        take_run(m)
      end
    end
  end
elseif nq == 1 then
  -- One queue: the first `limit` members are exactly the items to take; no claim of
  -- one of them changes this queue's other members (a scope has at most one
  -- candidate per queue).
  local q = queues[1]
  if run_max <= 1 then
    local popped = redis.call('ZPOPMIN', k_ready(q), ARGV[3])
    for i = 1, #popped, 2 do take(q, popped[i], nil, true) end
  else
    -- With runs, each head's run counts towards the limit: one head at a time.
    while count < run_limit do
      local popped = redis.call('ZPOPMIN', k_ready(q), 1)
      if #popped == 0 then break end
      if take(q, popped[1], nil, true) then take_run(popped[1]) end
    end
  end
else
  local limit = tonumber(ARGV[3])
  while count < limit do
    local want = limit - count
    local cands = {}
    for _, q in ipairs(queues) do
      local ms = redis.call('ZRANGE', k_ready(q), 0, want - 1, 'WITHSCORES')
      for i = 1, #ms, 2 do
        cands[#cands + 1] = {tonumber(ms[i + 1]), ms[i], q}
      end
    end
    if #cands == 0 then break end
    table.sort(cands, function(x, y)
      return order_lt(x[1], member_order(x[2]), y[1], member_order(y[2]))
    end)
    for i = 1, math.min(want, #cands) do
      -- Taking a scoped item removes the scope's entries of the other queues from
      -- `ready`; a member fetched before that is passed over here.
      local c = cands[i]
      if count >= limit then break end
      if redis.call('ZREM', k_ready(c[3]), c[2]) == 1 and take(c[3], c[2], nil, true) then
        take_run(c[2])
      end
    end
  end
end
for q, run in pairs(taken) do
  redis.call('ZADD', k_run(q), unpack(run))
  local ids = {}
  for i = 2, #run, 2 do ids[#ids + 1] = run[i] end
  redis.call('ZREM', k_readyat(q), unpack(ids))
  if expires < dues[q] then
    dues[q] = expires
    rewrite[q] = true
  end
end
for q, due in pairs(dues) do
  if rewrite[q] then write_due(q, due, paused[q]) end
end
-- G18: the virtual time of each fair queue follows the greatest tag claimed.
for q, t in pairs(tags) do
  local v = redis.call('HGET', k_fair(q), 'v')
  if not v or tonumber(v) < t then redis.call('HSET', k_fair(q), 'v', N(t)) end
end
return out
