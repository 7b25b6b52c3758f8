-- Store::enqueue. ARGV: now, count, then per item: id, queue, payload, stream, scope,
-- dedup key, dedup window (µs), priority, run_at, max_attempts, max_stalls,
-- max_renewals, the partition hash's high and low 32 bits (G14), the limit key (G16;
-- '' for an absent key), the fairness key ('' for none) and the weight (G18). Answers
-- per item {id, duplicate 0/1}, or the error CONFLICT when an id exists; every check
-- runs before the first write.
local now = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local F = 17
local items = {}
local seen = {}
local answers = {}
for i = 1, count do
  local b = 2 + (i - 1) * F
  local it = {
    id = ARGV[b + 1], q = ARGV[b + 2], pl = ARGV[b + 3], st = ARGV[b + 4],
    sc = ARGV[b + 5], dk = ARGV[b + 6], win = tonumber(ARGV[b + 7]),
    pr = tonumber(ARGV[b + 8]), ra = tonumber(ARGV[b + 9]), ma = ARGV[b + 10],
    ms = ARGV[b + 11], mr = ARGV[b + 12], hh = ARGV[b + 13], hl = ARGV[b + 14],
    lk = ARGV[b + 15], fk = ARGV[b + 16], w = tonumber(ARGV[b + 17]),
  }
  if it.st == '' then it.st = nil end
  if it.sc == '' then it.sc = nil end
  if it.dk == '' then it.dk = nil end
  if it.lk == '' then it.lk = nil end
  if it.fk == '' then it.fk = nil end
  local dup = nil
  if it.dk then
    local sk = it.q .. '\0' .. it.dk
    if seen[sk] then
      dup = seen[sk]
    else
      local v = redis.call('GET', k_dedup(it.q, it.dk))
      if v then
        local id, exp = string.match(v, '^(%S+) (%-?%d+)$')
        if id and tonumber(exp) > now then dup = id end
      end
      if not dup then seen[sk] = it.id end
    end
  end
  if not dup and redis.call('EXISTS', k_item(it.id)) == 1 then
    return redis.error_reply('CONFLICT an item with id ' .. it.id .. ' already exists')
  end
  it.dup = dup
  items[i] = it
end
-- G14: a pinned enqueue (the instance after the items) needs a registered instance.
local pin_to = ARGV[3 + count * F]
if pin_to == '' then pin_to = nil end
if pin_to and not redis.call('ZSCORE', K_INST_IDS, pin_to) then
  return redis.error_reply('NOTFOUND ' .. pin_to)
end
-- G18: the virtual time of each queue with fair shares this call enqueues to, false
-- for a queue without (read once per queue).
local vtimes = {}
-- TAG_UNIT / weight is one item's share of its tenant's time.
local TAG_UNIT = 16777216
-- The start tag of a new item of queue q, tenant fk (nil: the unnamed tenant '') and
-- declared weight w, or nil in a queue where no item named a tenant: max(virtual time,
-- its tenant's finish tag), and the tenant's finish tag moves on by TAG_UNIT / weight,
-- the weight the queue configures for the tenant, or else the item's own.
local function fair_tag(q, fk, w)
  local v = vtimes[q]
  if v == nil then
    local got = redis.call('HGET', k_fair(q), 'v')
    v = got and tonumber(got) or false
  end
  if v == false then
    if not fk then
      vtimes[q] = false
      return nil
    end
    v = 0
    redis.call('HSET', k_fair(q), 'v', '0')
  end
  vtimes[q] = v
  local tenant = fk or ''
  if fk then
    local set = redis.call('HGET', k_lweight(q), fk)
    if set then w = tonumber(set) end
  end
  local finish = tonumber(redis.call('ZSCORE', k_ftags(q), tenant) or '0')
  local start = math.max(finish, v)
  redis.call('ZADD', k_ftags(q), N(start + math.floor(TAG_UNIT / math.max(w, 1))), tenant)
  return start
end
-- Every check passed: write.
local inserted = 0
for i = 1, count do
  local it = items[i]
  if it.dup then
    answers[i] = {it.dup, 1}
  else
    local sq = redis.call('INCR', K_SEQ)
    redis.call('SADD', K_QUEUES, it.q)
    if it.dk then
      local exp = now + it.win
      local entry = it.q .. '\0' .. it.dk
      -- The store's clock decides (the value carries the expiry); the key's TTL, a
      -- day past the window, only collects keys nobody purges.
      redis.call('SET', k_dedup(it.q, it.dk), it.id .. ' ' .. N(exp),
        'PX', N(math.floor(it.win / 1000) + 86400000))
      redis.call('ZADD', K_DEDUP_EXP, N(exp), entry)
    end
    -- The item hash's fields, as lib.lua describes them.
    local mark = (it.st or it.sc or it.dk or it.lk) and ' + ' or ' - '
    local ft = fair_tag(it.q, it.fk, it.w)
    local fields = {'q', it.q, 'pl', it.pl, 's', 'ready 0 0 ' .. N(now) .. mark .. it.q,
      'n', N(it.pr) .. ' ' .. N(it.ra) .. ' 0 ' .. it.ma .. ' ' .. it.ms .. ' ' .. it.mr .. ' '
        .. N(now) .. ' ' .. N(sq) .. ' ' .. it.hh .. ' ' .. it.hl}
    if it.st then table.insert(fields, 'st'); table.insert(fields, it.st) end
    if it.sc then table.insert(fields, 'sc'); table.insert(fields, it.sc) end
    if it.dk then table.insert(fields, 'dk'); table.insert(fields, it.dk) end
    if it.lk then table.insert(fields, 'lk'); table.insert(fields, it.lk) end
    if ft then table.insert(fields, 'ft'); table.insert(fields, N(ft)) end
    redis.call('HSET', k_item(it.id), unpack(fields))
    redis.call('ZADD', k_all(it.q), N(sq), it.id)
    redis.call('ZADD', k_readyat(it.q), N(it.ra), it.id)
    local h = {id = it.id, q = it.q, pr = it.pr, ra = it.ra, sq = sq, sc = it.sc, st = it.st,
      lk = it.lk, ft = ft}
    local head = true
    if it.st then
      redis.call('ZADD', k_stream(it.st), N(sq), it.id)
      head = redis.call('ZCARD', k_stream(it.st)) == 1
    end
    if head then place(h, now) else redis.call('ZADD', k_hold(it.q), N(it.ra), it.id) end
    -- G14: a stream pinned to nobody goes to the enqueuing instance (first write wins).
    if pin_to and it.st and redis.call('SET', k_pin(it.st), pin_to, 'NX') then
      redis.call('SADD', k_pins(pin_to), it.st)
    end
    inserted = inserted + 1
    answers[i] = {it.id, 0}
  end
end
-- A queue remembers at most about 1,000 tenants' finish tags: those the virtual time
-- has passed would start at it anyway.
for q, v in pairs(vtimes) do
  if v and redis.call('ZCARD', k_ftags(q)) > 1024 then
    redis.call('ZREMRANGEBYSCORE', k_ftags(q), '-inf', N(v))
  end
end
if inserted > 0 then redis.call('SPUBLISH', K_WAKE, '1') end
return answers
