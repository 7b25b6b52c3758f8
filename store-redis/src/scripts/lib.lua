-- Shared by every operation: the key layout and the index moves of the state machine.
-- The top of the one function library (`scripts.rs`): these definitions are made once,
-- when the server loads the library, not on every call.
--
-- KEYS[1] is the prefix's root key `{prefix}`; every key below starts with it, so all
-- of a prefix's keys hash to one slot (Redis Cluster routes the call by KEYS[1]).
-- Each function sets it with set_root before anything else; a function runs alone
-- on the server, so no other call sees P change under it.
--
-- Numbers: Lua numbers are doubles, exact for integers below 2^53 (times are
-- microseconds since the epoch, about 1.7e15). Every number written to Redis goes
-- through N(), never through Lua's own number-to-string conversion (which keeps only
-- 14 significant digits).

local P
local function N(n) return string.format('%d', n) end

local K_SEQ       -- string: the last enqueue sequence number
local K_QUEUES    -- set: every queue that has had an item
local K_DEDUP_EXP -- zset: dedup entries (queue \0 key) by expiry
local K_INST      -- zset: instances by registration order
local K_INST_SEEN -- zset: instances by last heartbeat
local K_INST_IDS  -- zset: instances, all scored 0, so by id in byte order (G14 rank)
local K_INST_SEQ  -- string: the last registration number
local K_WAKE      -- pub/sub channel: new work (a hint)
local K_PAUSED    -- hash: paused queue -> when it was paused
local K_LAYOUT    -- string: the key layout version (below ensure_layout)
local K_LIMQ      -- set: every queue with limits (G16, G17)

-- Every function of the library calls this first with its KEYS[1]. The keys stay
-- built while calls name the same root, as one store's calls do.
local function set_root(root)
  if root == P then return end
  P = root
  K_SEQ = P .. ':seq'
  K_QUEUES = P .. ':queues'
  K_DEDUP_EXP = P .. ':dedupx'
  K_INST = P .. ':inst'
  K_INST_SEEN = P .. ':seen'
  K_INST_IDS = P .. ':ids'
  K_INST_SEQ = P .. ':instseq'
  K_WAKE = P .. ':wake'
  K_PAUSED = P .. ':paused'
  K_LAYOUT = P .. ':layout'
  K_LIMQ = P .. ':limq'
end

local function k_item(id) return P .. ':i:' .. id end          -- hash: one item
local function k_ready(q) return P .. ':r:' .. q end           -- zset: claimable candidates
local function k_sched(q) return P .. ':t:' .. q end           -- zset: scheduled candidates by run_at
local function k_run(q) return P .. ':l:' .. q end             -- zset: running items by lease expiry
local function k_count(q) return P .. ':a:' .. q end           -- hash: `d` and `p`, the queue's due bound and pause flag (below)
local function k_hold(q) return P .. ':h:' .. q end            -- zset: ready items behind their stream's head, by run_at
local function k_dead(q) return P .. ':z:' .. q end            -- zset: dead items by when they died (dead_member)
local function k_dead4(q) return P .. ':x:' .. q end           -- set: layout 4's dead items (gone in 5)
local function k_done(q) return P .. ':f:' .. q end            -- zset: kept finished items by finish time
local function k_stream(s) return P .. ':s:' .. s end          -- zset: unfinished items of a stream by seq
local function k_scope_run(sc) return P .. ':c:' .. sc end     -- string: the running item of a scope
local function k_scope_wait(sc, q) return P .. ':w:' .. q .. '\0' .. sc end -- zset: due candidates of a scope
local function k_scope_queues(sc) return P .. ':k:' .. sc end  -- set: queues with waiting items of a scope
local function k_owner(o) return P .. ':o:' .. o end           -- set: layout 3's running items of an owner (gone in 4)
local function k_dedup(q, key) return P .. ':d:' .. q .. '\0' .. key end -- string: "id expires_at"
local function k_instance(id) return P .. ':n:' .. id end      -- hash: one instance
local function k_leader(name) return P .. ':ld:' .. name end   -- hash: one leader lease
local function k_pin(s) return P .. ':p:' .. s end             -- string: the instance a stream is pinned to (G14)
local function k_pins(o) return P .. ':ps:' .. o end           -- set: the streams pinned to an instance (G14)
local function k_all(q) return P .. ':e:' .. q end             -- zset: every stored item of a queue by seq (listings)
local function k_readyat(q) return P .. ':y:' .. q end         -- zset: ready items of a queue by run_at (oldest age)
-- Queue limits (G16, G17). No counter of running items: a claim counts the queue's
-- running set `l` (and, per limit key, the `lk` of its members), so a slot comes back
-- exactly when its lease leaves `running`, by its own fenced token or by recovery.
local function k_lim(q) return P .. ':lim:' .. q end           -- hash: a queue's limits: `set`, and c, kc, rs, rp, krs, krp when set
local function k_lover(q) return P .. ':lo:' .. q end          -- hash: limit key -> its concurrency override
local function k_lweight(q) return P .. ':lw:' .. q end        -- hash: fairness key -> its weight (kept for G18)
local function k_defer(q) return P .. ':df:' .. q end          -- hash: limit key ('' the queue) -> no start before (µs)
local function k_starts(q, key) return P .. ':rs:' .. q .. '\0' .. key end -- zset: starts of the last period ('' the queue), by time
local function k_ratekeys(q) return P .. ':rk:' .. q end       -- set: the keys with a `rs` zset
-- Limit keys' candidates (layout 6). A due candidate with a limit key and no scope
-- waits in its key's own set `kr`; `ready` holds only the first of each key that is
-- not parked, so a claim never reads a saturated key's backlog. A key is parked (out
-- of `ready`, in `pk`) when a claim finds it at a bound, and comes back when one of
-- its leases leaves `running`, when the queue's limits change, or at the time in `pk`
-- (a rate window's or a deferral's end). A key's running items are the set `kl`,
-- kept with the lease: a claim adds the item, the step that takes it out of the
-- running set removes it, so a slot is still a lease.
local function k_kready(q, key) return P .. ':kr:' .. q .. '\0' .. key end -- zset: a key's due candidates (claim order)
local function k_kqueue(q) return P .. ':kq:' .. q end         -- set: the keys of q with due candidates
local function k_krun(q, key) return P .. ':kl:' .. q .. '\0' .. key end  -- set: a key's running items
local function k_park(q) return P .. ':pk:' .. q end           -- zset: parked keys by when time may open them
-- Fair shares (G18): `v` the queue's virtual time; present once an item named a
-- tenant. `ft` the tenants' finish tags ('' the unnamed tenant).
local function k_fair(q) return P .. ':fv:' .. q end           -- hash: `v`, the virtual time
local function k_ftags(q) return P .. ':ft:' .. q end          -- zset: tenant -> finish tag

-- The limits of queue q as limits_get answers them, or nil when it has none:
-- {c, kc, rs, rp, krs, krp ('' when unset), {override key, n, ...}, {weight key, w, ...}}.
local function limits_of(q)
  local v = redis.call('HMGET', k_lim(q), 'set', 'c', 'kc', 'rs', 'rp', 'krs', 'krp')
  if not v[1] then return nil end
  local out = {}
  for i = 2, 7 do out[i - 1] = v[i] or '' end
  out[7] = redis.call('HGETALL', k_lover(q))
  out[8] = redis.call('HGETALL', k_lweight(q))
  return out
end

-- The member of an item in a claim-order zset (`ready`, a scope's waiting set). The
-- score is the priority; equal scores sort by member, so the member encodes run_at
-- and the enqueue sequence as fixed-width hex, then the id (G8).
-- In a queue with fair shares (G18) an item has a start tag `ft`, and its member is
-- 'v', the tag, run_at and sequence, then the id: ordered by tag first, after the
-- untagged items of the queue (those enqueued before its first tenant, tag 0).
local function order_member(ra, sq, id, ft)
  if ft then return string.format('v%016x%016x%016x', ft, ra, sq) .. id end
  return string.format('%016x%016x', ra, sq) .. id
end
local function member_id(m)
  if string.byte(m, 1) == 118 then return string.sub(m, 50) end
  return string.sub(m, 33)
end
-- The start tag of a member, or nil.
local function member_tag(m)
  if string.byte(m, 1) == 118 then return tonumber(string.sub(m, 2, 17), 16) end
  return nil
end
-- A member without its tag: how claims of several queues compare their candidates.
local function member_order(m)
  if string.byte(m, 1) == 118 then return string.sub(m, 18) end
  return m
end

-- The member of a dead item in its queue's dead set, scored by when it died: the
-- enqueue sequence as fixed-width hex, then the id, so equal times sort in enqueue
-- order.
local function dead_member(h) return string.format('%016x', h.sq) .. h.id end
local function dead_member_id(m) return string.sub(m, 17) end

-- (score a, member a) < (score b, member b) in zset order.
local function order_lt(sa, ma, sb, mb)
  if sa ~= sb then return sa < sb end
  return ma < mb
end

-- An item hash has few fields, because every field a command names is a scan of the
-- hash's listpack and every value read is a conversion into Lua:
--   q           the queue
--   pl          the payload
--   st, sc, dk  the stream, scope and dedup keys (absent when none)
--   e           the last error (absent when none)
--   s           "<state> <attempt> <renewals> <updated_at> <mark> <queue>", and once
--               claimed " <lease>" after them: what every transition writes, and the
--               fence reads. The lease is the id the claim minted (16 hex digits, as
--               the client sent it; G3): the fence compares it with the token's as
--               well as the attempt, because a failover that lost a claim hands the
--               same attempt number out again. Layout 4 wrote no lease: a running
--               item without one is on lease 0 (NO_LEASE). The mark is '-' when the
--               item has none of st, sc, dk and e, '+' when it may have some (a
--               field written once sets it), so a claim or a finalize reads those
--               fields only when it must, and a finalize reads nothing but `s`.
--               Layout 3 wrote the first four words only: no mark reads as '+'.
--   n           "<priority> <run_at> <stalls> <max_attempts> <max_stalls>
--               <max_renewals> <created_at> <seq> <hash_hi> <hash_lo>": what few
--               transitions change; the first seven in the order a claim answers them
--   l           "<owner> <lease_expires_at>", only while running
--   lk          the limit key (G16, G17; absent when none); it sets the mark (layout
--               6), so a finalize reads it and leaves the key's running set
--   ft          the start tag (G18; absent in a queue no tenant was named in)
--   pg          the last progress a holder reported with an accepted renewal, as
--               Progress::encode writes it (absent when none): written by renew,
--               read only by item reads, so it takes no part in the mark

-- The mark of h's `s` field (above): '+' when it has a stream, scope, dedup key, last
-- error or limit key.
local function mark_of(h)
  if h.st or h.sc or h.dk or h.e or h.lk then return '+' end
  return '-'
end

-- The `s` field of h.
local function state_of(h)
  local s = h.s .. ' ' .. N(h.a) .. ' ' .. N(h.rn) .. ' ' .. N(h.ua) .. ' ' .. mark_of(h) .. ' ' .. h.q
  if h.lid then s = s .. ' ' .. h.lid end
  return s
end

-- The lease of a running item written by layout 4, which minted none (G3).
local NO_LEASE = '0000000000000000'

-- The lease word of an item's `s`, or nil when it has none (never claimed, or last
-- written by layout 4). The whole field is matched: a queue's name may itself look
-- like a lease.
local function lease_of(s)
  return string.match(s, '^%a+ %d+ %d+ %-?%d+ [%+%-] %S+ (%x+)$')
end

-- The `n` field of h.
local function numbers_of(h)
  return N(h.pr) .. ' ' .. N(h.ra) .. ' ' .. N(h.sl) .. ' ' .. N(h.ma) .. ' ' .. N(h.ms)
    .. ' ' .. N(h.mr) .. ' ' .. N(h.ca) .. ' ' .. N(h.sq) .. ' ' .. h.hh .. ' ' .. h.hl
end

-- The fields of an item hash as a table, or nil when there is no such item.
local function load(id)
  local flat = redis.call('HGETALL', k_item(id))
  if #flat == 0 then return nil end
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  h.id = id
  h.lid = lease_of(h.s)
  local s, a, rn, ua = string.match(h.s, '^(%a+) (%d+) (%d+) (%-?%d+)')
  h.s, h.a, h.rn, h.ua = s, tonumber(a), tonumber(rn), tonumber(ua)
  local pr, ra, sl, ma, ms, mr, ca, sq, hh, hl = string.match(h.n,
    '^(%-?%d+) (%-?%d+) (%d+) (%d+) (%d+) (%d+) (%-?%d+) (%d+) (%d+) (%d+)$')
  h.pr, h.ra, h.sl, h.ma, h.ms = tonumber(pr), tonumber(ra), tonumber(sl), tonumber(ma), tonumber(ms)
  h.mr, h.ca, h.sq, h.hh, h.hl = tonumber(mr), tonumber(ca), tonumber(sq), hh, hl
  if h.ft then h.ft = tonumber(h.ft) end
  if h.l then
    local o, le = string.match(h.l, '^(%S+) (%-?%d+)$')
    h.o, h.le = o, tonumber(le)
  end
  return h
end

-- The attempt (a decimal string, as written) and the mark of a ready item's `s`, or
-- nil when it is not ready; the mark is nil for an `s` of layout 3, which has none.
local function ready_attempt(s)
  if not s then return nil end
  local a, mark = string.match(s, '^ready (%d+) %d+ %-?%d+ ([%+%-]) ')
  if a then return a, mark end
  return string.match(s, '^ready (%d+) '), nil
end

-- True when token (id, attempt, lease) names the item's current running lease (G3).
local function is_current(h, attempt, lease)
  return h ~= nil and h.s == 'running' and h.a == attempt and (h.lid or NO_LEASE) == lease
end

-- Places a due candidate: in `ready`, or in its scope's waiting set, and in `ready`
-- when it is the first of that set and the scope is free (G10).
local function place_due(h)
  local m = order_member(h.ra, h.sq, h.id, h.ft)
  local score = N(h.pr)
  if not h.sc then
    if h.lk then
      -- A limit key's candidate: in its key's set, and in `ready` when it is the
      -- first of a key that is not parked (G16).
      local kk = k_kready(h.q, h.lk)
      local first = redis.call('ZRANGE', kk, 0, 0, 'WITHSCORES')
      redis.call('ZADD', kk, score, m)
      if #first == 0 then redis.call('SADD', k_kqueue(h.q), h.lk) end
      if redis.call('ZSCORE', k_park(h.q), h.lk) then return end
      if #first == 0 then
        redis.call('ZADD', k_ready(h.q), score, m)
      elseif order_lt(h.pr, m, tonumber(first[2]), first[1]) then
        redis.call('ZREM', k_ready(h.q), first[1])
        redis.call('ZADD', k_ready(h.q), score, m)
      end
      return
    end
    redis.call('ZADD', k_ready(h.q), score, m)
    return
  end
  local wk = k_scope_wait(h.sc, h.q)
  local first = redis.call('ZRANGE', wk, 0, 0, 'WITHSCORES')
  redis.call('ZADD', wk, score, m)
  redis.call('SADD', k_scope_queues(h.sc), h.q)
  if redis.call('EXISTS', k_scope_run(h.sc)) == 1 then return end
  if #first == 0 then
    redis.call('ZADD', k_ready(h.q), score, m)
  elseif order_lt(h.pr, m, tonumber(first[2]), first[1]) then
    redis.call('ZREM', k_ready(h.q), first[1])
    redis.call('ZADD', k_ready(h.q), score, m)
  end
end

-- A queue's due bound (field `d` of its count hash) is a lower bound on the earliest
-- lease expiry in its running set and the earliest run_at in its scheduled set (NEVER
-- when both are empty), or absent when unknown. A claim before it has nothing to
-- recover or promote, so it skips both (see catch_up); whatever adds to either set
-- lowers it, and only catch_up raises it, from the sets themselves. Beside it, `p` is
-- the queue's pause flag ('1' paused, '0' not) as of the last write of `d`, kept by
-- pause and resume too, so a claim reads both in one call; without `d` (a queue no
-- claim of layout 3 has seen) `p` is not trusted and the claim reads the paused set.
local NEVER = 9007199254740992 -- 2^53, after every time the functions handle

-- Lowers queue `q`'s `due` to time `t` if it is later.
local function lower_due(q, t)
  local d = redis.call('HGET', k_count(q), 'd')
  if d and tonumber(d) > t then redis.call('HSET', k_count(q), 'd', N(t)) end
end

-- Places a candidate (ready, head of its stream) at `now`: scheduled, or due (G7).
local function place(h, now)
  if h.ra > now then
    redis.call('ZADD', k_sched(h.q), N(h.ra), h.id)
    lower_due(h.q, h.ra)
  else
    place_due(h)
  end
end

-- True when the item is the first unfinished item of its stream, or has none (G9).
local function is_stream_head(h)
  if not h.st then return true end
  local first = redis.call('ZRANGE', k_stream(h.st), 0, 0)
  return first[1] == h.id
end

-- Places the item `id` if it is ready and heads its stream; it leaves the queue's
-- set of items held behind a head.
local function place_if_candidate(id, now)
  local h = load(id)
  if h and h.s == 'ready' and is_stream_head(h) then
    redis.call('ZREM', k_hold(h.q), id)
    place(h, now)
  end
end

-- Marks scope `sc` busy with `id`, just claimed from queue `q` under member `m`: the
-- scope's waiting items leave `ready` (G10).
local function scope_taken(sc, q, m, id)
  local wk = k_scope_wait(sc, q)
  redis.call('ZREM', wk, m)
  if redis.call('ZCARD', wk) == 0 then redis.call('SREM', k_scope_queues(sc), q) end
  redis.call('SET', k_scope_run(sc), id)
  for _, q2 in ipairs(redis.call('SMEMBERS', k_scope_queues(sc))) do
    local first = redis.call('ZRANGE', k_scope_wait(sc, q2), 0, 0)
    if first[1] then redis.call('ZREM', k_ready(q2), first[1]) end
  end
end

-- Marks scope `sc` free: the first waiting item of each queue goes back to `ready`.
local function scope_freed(sc)
  redis.call('DEL', k_scope_run(sc))
  for _, q2 in ipairs(redis.call('SMEMBERS', k_scope_queues(sc))) do
    local first = redis.call('ZRANGE', k_scope_wait(sc, q2), 0, 0, 'WITHSCORES')
    if first[1] then redis.call('ZADD', k_ready(q2), first[2], first[1]) end
  end
end

-- Puts parked limit key `key` of queue `q` back: its first candidate into `ready`.
local function unpark(q, key)
  if redis.call('ZREM', k_park(q), key) == 0 then return end
  local first = redis.call('ZRANGE', k_kready(q, key), 0, 0, 'WITHSCORES')
  if first[1] then redis.call('ZADD', k_ready(q), first[2], first[1]) end
end

-- Puts every parked key of queue `q` back (its limits changed).
local function unpark_all(q)
  for _, key in ipairs(redis.call('ZRANGE', k_park(q), 0, -1)) do unpark(q, key) end
end

-- Item `id` of limit key `key` left the running set of queue `q`: out of the key's
-- running set, and the key, if parked, back in `ready` (a slot may be free, G16).
local function key_left(q, key, id)
  redis.call('SREM', k_krun(q, key), id)
  unpark(q, key)
end

-- Takes a running item out of the running indexes and frees its scope and its limit
-- key's slot; called while the item is still `running`, just before the transition
-- that ends it.
local function unlink_running(h)
  redis.call('ZREM', k_run(h.q), h.id)
  if h.sc then scope_freed(h.sc) end
  if h.lk then key_left(h.q, h.lk, h.id) end
end

-- After finishes that left the running sets of `queues` (a table keyed by queue): when
-- one of them has limits, a slot may have come back, so the wake-up hint goes out once
-- (G16): workers of other processes waiting for the slot claim at once.
local function slots_freed(queues)
  for q in pairs(queues) do
    if redis.call('EXISTS', k_lim(q)) == 1 then
      redis.call('SPUBLISH', K_WAKE, '1')
      return
    end
  end
end

-- Takes a finished or deleted item out of its stream; when it was the head, the next
-- item becomes a candidate (G9). A stream left with no unfinished item loses its pin
-- (G14).
local function stream_leave(h, now)
  if not h.st then return end
  local sk = k_stream(h.st)
  local head = redis.call('ZRANGE', sk, 0, 0)
  redis.call('ZREM', sk, h.id)
  if head[1] == h.id then
    local nxt = redis.call('ZRANGE', sk, 0, 0)
    if nxt[1] then
      place_if_candidate(nxt[1], now)
    else
      local pinned = redis.call('GET', k_pin(h.st))
      if pinned then
        redis.call('DEL', k_pin(h.st))
        redis.call('SREM', k_pins(pinned), h.st)
      end
    end
  end
end

-- An item that was not ready becomes ready: it counts in its queue's ready items
-- (for counts) and is placed if it heads its stream (an item of a stream run behind
-- its head does not: it waits with the held items, G9).
local function become_ready(h, now)
  h.s = 'ready'
  h.ua = now
  redis.call('HSET', k_item(h.id), 's', state_of(h), 'n', numbers_of(h))
  redis.call('HDEL', k_item(h.id), 'l')
  redis.call('ZADD', k_readyat(h.q), N(h.ra), h.id)
  if is_stream_head(h) then
    place(h, now)
  else
    redis.call('ZADD', k_hold(h.q), N(h.ra), h.id)
  end
end

-- Most items of one stream run (tenure_core::MAX_STREAM_RUN).
local MAX_RUN = 1000

-- The put-back rule of stream runs (G9), as machine::put_back: the item of stream
-- `st` at sequence `sq` left `running` unfinished, so the running items right behind
-- it (the rest of its run) go back to ready untouched: attempt, stalls and run_at
-- kept, max_attempts + 1. They are not heads, so they wait with the held items.
local function put_back_after(st, sq, now)
  local ids = redis.call('ZRANGEBYSCORE', k_stream(st), '(' .. N(sq), '+inf', 'LIMIT', 0, MAX_RUN)
  for _, id in ipairs(ids) do
    local h = load(id)
    if not h or h.s ~= 'running' then break end
    unlink_running(h)
    h.ma = h.ma + 1
    h.s = 'ready'
    h.ua = now
    redis.call('HSET', k_item(id), 's', state_of(h), 'n', numbers_of(h))
    redis.call('HDEL', k_item(id), 'l')
    redis.call('ZADD', k_readyat(h.q), N(h.ra), id)
    redis.call('ZADD', k_hold(h.q), N(h.ra), id)
  end
end

local function become_dead(h, now)
  h.s = 'dead'
  h.ua = now
  redis.call('HSET', k_item(h.id), 's', state_of(h), 'n', numbers_of(h))
  redis.call('HDEL', k_item(h.id), 'l')
  redis.call('ZADD', k_dead(h.q), N(now), dead_member(h))
end

-- An expired or evicted lease (already unlinked): counts a stall; dead at max_stalls
-- (G6), else back to ready at `now` (G2). Returns 'dead' or 'requeued'.
local function stall(h, now)
  h.sl = h.sl + 1
  if h.sl >= h.ms then
    h.e = 'stalled: lease expired ' .. N(h.sl) .. ' times'
    redis.call('HSET', k_item(h.id), 'e', h.e)
    become_dead(h, now)
    return 'dead'
  end
  h.ra = now
  become_ready(h, now)
  return 'requeued'
end

-- Recovers the item `id` if its lease has expired at `now`; returns what happened
-- or nil.
-- An item of a stream run behind its head is recovered with its run: the run's
-- head (the stream's head) first, if it has expired too, which puts the rest back
-- untouched (G9).
local function recover_one(id, now)
  local h = load(id)
  if not h or h.s ~= 'running' or h.le == nil or h.le > now then return nil end
  if h.st and not is_stream_head(h) then
    local first = redis.call('ZRANGE', k_stream(h.st), 0, 0)[1]
    local f = first and load(first)
    if f and f.s == 'running' and f.le ~= nil and f.le <= now then
      unlink_running(f)
      local r = stall(f, now)
      put_back_after(f.st, f.sq, now)
      return r
    end
  end
  unlink_running(h)
  local r = stall(h, now)
  if h.st then put_back_after(h.st, h.sq, now) end
  return r
end

-- Recovers every expired lease of queue `q` (G2, G6), oldest first.
local function recover_queue(q, now)
  local ids = redis.call('ZRANGEBYSCORE', k_run(q), '-inf', N(now))
  for _, id in ipairs(ids) do recover_one(id, now) end
end

-- Moves queue `q`'s scheduled candidates that have come due (G7).
local function promote_due(q, now)
  local ids = redis.call('ZRANGEBYSCORE', k_sched(q), '-inf', N(now))
  if #ids == 0 then return end
  for _, id in ipairs(ids) do
    local h = load(id)
    if h and h.s == 'ready' then place_due(h) end
  end
  redis.call('ZREMRANGEBYSCORE', k_sched(q), '-inf', N(now))
end

-- Before a claim of queue `q` at `now`: recovers its expired leases and promotes its
-- due schedules (G2, G6, G7), unless its due bound shows there can be none. Answers
-- the queue's due bound, true when the bound was recomputed and is to be written
-- (with the flag, see write_due), and the pause flag ('1' when paused).
local function catch_up(q, now)
  local v = redis.call('HMGET', k_count(q), 'd', 'p')
  if v[1] and v[2] then
    local d = tonumber(v[1])
    if d > now then return d, false, v[2] end
  end
  local paused = redis.call('HEXISTS', K_PAUSED, q) == 1 and '1' or '0'
  recover_queue(q, now)
  promote_due(q, now)
  local due = NEVER
  local r = redis.call('ZRANGE', k_run(q), 0, 0, 'WITHSCORES')
  if r[2] then due = tonumber(r[2]) end
  local s = redis.call('ZRANGE', k_sched(q), 0, 0, 'WITHSCORES')
  if s[2] and tonumber(s[2]) < due then due = tonumber(s[2]) end
  return due, true, paused
end

-- Writes queue `q`'s due bound and its pause flag as catch_up answered it.
local function write_due(q, due, paused)
  redis.call('HSET', k_count(q), 'd', N(due), 'p', paused)
end

-- The decimal string of attempt string `a` plus one, remembered for the usual
-- attempts (each string-to-number and number-to-string conversion costs about as
-- much as a small redis.call). Filled as calls need it: the library's top level
-- cannot call string functions while it loads.
local NEXT_ATTEMPT = {}
local function next_attempt(a)
  local n = NEXT_ATTEMPT[a]
  if n then return n end
  n = N(a + 1)
  if #a <= 2 then NEXT_ATTEMPT[a] = n end
  return n
end

-- Deletes an item that is in no claim index (done or dead).
local function delete(h)
  redis.call('DEL', k_item(h.id))
  redis.call('ZREM', k_all(h.q), h.id)
  redis.call('ZREM', k_dead(h.q), dead_member(h))
  redis.call('ZREM', k_done(h.q), h.id)
end

-- Drops every pin of `owner` (G14), as it leaves the registry.
local function unpin_owner(owner)
  local ps = k_pins(owner)
  for _, s in ipairs(redis.call('SMEMBERS', ps)) do redis.call('DEL', k_pin(s)) end
  redis.call('DEL', ps)
end

-- Applies eviction to every running item of `owner`; returns how many (G12). The
-- owner's items are found in the queues' running sets: no index per owner is kept on
-- the claim and finalize path, so this costs O(running items), and it runs only when
-- an instance leaves or is evicted.
local function release_owner(owner, now)
  -- A set layout 3 kept; a store upgraded from it may still have one.
  redis.call('DEL', k_owner(owner))
  local ids = {}
  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
    for _, id in ipairs(redis.call('ZRANGE', k_run(q), 0, -1)) do ids[#ids + 1] = id end
  end
  -- In enqueue order: the head of a stream run is evicted, the rest put back (G9).
  local hs = {}
  for _, id in ipairs(ids) do
    local h = load(id)
    if h and h.o == owner then hs[#hs + 1] = h end
  end
  table.sort(hs, function(x, y) return x.sq < y.sq end)
  local released = 0
  local left = {}
  for _, h0 in ipairs(hs) do
    local h = load(h0.id)
    if h and h.s == 'running' and h.o == owner then
      unlink_running(h)
      stall(h, now)
      released = released + 1
      left[h.q] = true
      if h.st then put_back_after(h.st, h.sq, now) end
    end
  end
  -- Slots of limited queues came back: workers of other processes claim (G16).
  slots_freed(left)
  return released
end

-- The k-th space-separated word of a packed field (`s`, `n`, `l`), or nil.
local function word(str, k)
  local i = 0
  for w in string.gmatch(str, '%S+') do
    i = i + 1
    if i == k then return w end
  end
  return nil
end

-- The key layout, recorded under K_LAYOUT by the first operator call that sees an
-- earlier one:
--   2: every item in its queue's `k_all` by seq, every ready item in its queue's
--      `k_readyat` by run_at (the operator's listings). A store written before has
--      neither; they are built from the item hashes, in one call.
--   3: a queue's ready items are counted by its `k_readyat` (no `ready` counter), and
--      its count hash holds the due bound `d` with the pause flag `p` (no `due`).
--      From 2 nothing is built: the old fields are deleted. A claim needs no upgrade:
--      on a queue without `d` it recovers, promotes and reads the paused set, then
--      writes `d` and `p`.
--   4: no set of running items per owner (an eviction finds them in the running
--      sets), and an item's `s` ends with the mark and the queue (the item layout
--      above). From 3 the owner sets are deleted; nothing is rewritten: an `s` of
--      four words reads as marked, so its fields are read, and the next transition
--      writes it whole.
--   5: a running item's `s` ends with its lease id (the item layout above), and a
--      queue's dead items are a sorted set by when they died (`k_dead`), so a
--      filtered requeue or discard reads only the items it takes. From 4 the dead
--      sets of layout 4 are turned into it, dead items only, and deleted; nothing
--      else is rewritten: a running item without a lease is on NO_LEASE.
-- Every later write keeps the layout in step. Stores of two layouts do not share a
-- prefix: an earlier version keeps neither `d` nor `p`, reads owner sets that layout
-- 4 does not keep, and drops the lease of layout 5 when it renews.
--   6: a due candidate with a limit key and no scope waits in its key's set `kr`,
--      and `ready` holds the first of each key that is not parked; a key's running
--      items are its set `kl`; a limit key sets an item's mark (lib.lua's item
--      layout). From 5 (see key_sets) the keyed candidates in `ready` move to their
--      keys' sets and the running items with a key join its running set, marked.
local LAYOUT = '6'

-- Layout 6's key sets from layout 5's `ready` and running sets.
local function key_sets()
  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
    for _, id in ipairs(redis.call('ZRANGE', k_run(q), 0, -1)) do
      local v = redis.call('HMGET', k_item(id), 's', 'lk')
      if v[1] and v[2] then
        redis.call('SADD', k_krun(q, v[2]), id)
        local marked, n = string.gsub(v[1], '^(%a+ %d+ %d+ %-?%d+ )%- ', '%1+ ')
        if n > 0 then redis.call('HSET', k_item(id), 's', marked) end
      end
    end
    for _, m in ipairs(redis.call('ZRANGE', k_ready(q), 0, -1)) do
      local h = load(member_id(m))
      if h and h.lk and not h.sc
        and not redis.call('ZSCORE', k_kready(q, h.lk), m) then
        redis.call('ZREM', k_ready(q), m)
        place_due(h)
      end
    end
  end
end

-- Deletes the owner sets of layout 3 and before.
local function drop_owner_sets()
  local cursor = '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', P .. ':o:*', 'COUNT', 1000)
    cursor = r[1]
    if #r[2] > 0 then redis.call('DEL', unpack(r[2])) end
  until cursor == '0'
end

-- Layout 5's dead sets from layout 4's (before it, dead items were in the same sets).
local function sort_dead_sets()
  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
    for _, id in ipairs(redis.call('SMEMBERS', k_dead4(q))) do
      local v = redis.call('HMGET', k_item(id), 's', 'n')
      if v[1] and word(v[1], 1) == 'dead' then
        redis.call('ZADD', k_dead(q), word(v[1], 4), string.format('%016x', tonumber(word(v[2], 8))) .. id)
      end
    end
    redis.call('DEL', k_dead4(q))
  end
end

local function ensure_layout()
  local was = redis.call('GET', K_LAYOUT)
  if was == LAYOUT then return end
  -- A store that has never held an item has nothing to upgrade (and no SCAN of the
  -- server's keys is run for it).
  if not was and redis.call('EXISTS', K_QUEUES) == 0 then
    redis.call('SET', K_LAYOUT, LAYOUT)
    return
  end
  key_sets()
  if was == '5' then
    redis.call('SET', K_LAYOUT, LAYOUT)
    return
  end
  sort_dead_sets()
  if was == '4' then
    redis.call('SET', K_LAYOUT, LAYOUT)
    return
  end
  drop_owner_sets()
  if was == '3' then
    redis.call('SET', K_LAYOUT, LAYOUT)
    return
  end
  for _, q in ipairs(redis.call('SMEMBERS', K_QUEUES)) do
    redis.call('HDEL', k_count(q), 'ready', 'due')
  end
  if was == '2' then
    redis.call('SET', K_LAYOUT, LAYOUT)
    return
  end
  local cursor = '0'
  local from = #(P .. ':i:') + 1
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', P .. ':i:*', 'COUNT', 1000)
    cursor = r[1]
    for _, key in ipairs(r[2]) do
      local v = redis.call('HMGET', key, 'q', 's', 'n')
      if v[1] and v[2] and v[3] then
        local id = string.sub(key, from)
        redis.call('ZADD', k_all(v[1]), word(v[3], 8), id)
        if word(v[2], 1) == 'ready' then redis.call('ZADD', k_readyat(v[1]), word(v[3], 2), id) end
      end
    end
  until cursor == '0'
  redis.call('SET', K_LAYOUT, LAYOUT)
end

-- Takes a ready stream head out of the claim indexes (the inverse of `place`): from
-- the scheduled set, or from `ready` and its scope's waiting set, putting the scope's
-- next waiting item into `ready` when this one was first and the scope is free.
local function unplace(h)
  if redis.call('ZREM', k_sched(h.q), h.id) == 1 then return end
  local m = order_member(h.ra, h.sq, h.id, h.ft)
  local was_first = redis.call('ZREM', k_ready(h.q), m) == 1
  if not h.sc then
    if h.lk then
      -- Out of its key's set; the key's next candidate takes its place in `ready`.
      local kk = k_kready(h.q, h.lk)
      redis.call('ZREM', kk, m)
      local nxt = redis.call('ZRANGE', kk, 0, 0, 'WITHSCORES')
      if not nxt[1] then
        redis.call('SREM', k_kqueue(h.q), h.lk)
        redis.call('ZREM', k_park(h.q), h.lk)
      elseif was_first then
        redis.call('ZADD', k_ready(h.q), nxt[2], nxt[1])
      end
    end
    return
  end
  local wk = k_scope_wait(h.sc, h.q)
  local first = redis.call('ZRANGE', wk, 0, 0)
  redis.call('ZREM', wk, m)
  if first[1] == m and redis.call('EXISTS', k_scope_run(h.sc)) == 0 then
    local nxt = redis.call('ZRANGE', wk, 0, 0, 'WITHSCORES')
    if nxt[1] then redis.call('ZADD', k_ready(h.q), nxt[2], nxt[1]) end
  end
  if redis.call('ZCARD', wk) == 0 then redis.call('SREM', k_scope_queues(h.sc), h.q) end
end
