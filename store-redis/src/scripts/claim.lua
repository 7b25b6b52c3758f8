-- Store::claim. ARGV: now, owner, limit, lease (µs), queue count, queues...
-- Recovers the queues' expired leases and moves their due scheduled candidates first
-- (G2, G6, G7), then takes candidates by (priority, run_at, seq) across the queues
-- (G8). Every entry of a `ready` zset is claimable (G9, G10 are kept by the write
-- path), so a claim of B items reads about B entries. Answers the claimed items'
-- fields (HGETALL form), in claim order.
local now = tonumber(ARGV[1])
local owner = ARGV[2]
local limit = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local nq = tonumber(ARGV[5])
local queues = {}
for i = 1, nq do queues[i] = ARGV[5 + i] end
for _, q in ipairs(queues) do recover_queue(q, now) end
for _, q in ipairs(queues) do promote_due(q, now) end

local expires = now + lease
local out = {}
local function take(q, m)
  -- Taking a scoped item removes other queues' entries of its scope from `ready`; a
  -- member fetched before that is skipped here.
  if redis.call('ZREM', k_ready(q), m) == 0 then return false end
  local id = member_id(m)
  local h = load(id)
  if not h or h.s ~= 'ready' then return false end
  local key = k_item(id)
  redis.call('HSET', key, 's', 'running', 'a', N(h.a + 1), 'o', owner, 'le', N(expires),
    'rn', '0', 'ua', N(now))
  redis.call('ZREM', k_readyall(q), id)
  redis.call('ZADD', k_run(q), N(expires), id)
  redis.call('SADD', k_owner(owner), id)
  if h.sc then scope_taken(h.sc, q, m, id) end
  out[#out + 1] = redis.call('HGETALL', key)
  return true
end

if nq == 1 then
  local q = queues[1]
  while #out < limit do
    local ms = redis.call('ZRANGE', k_ready(q), 0, limit - #out - 1)
    if #ms == 0 then break end
    for _, m in ipairs(ms) do take(q, m) end
  end
else
  while #out < limit do
    local want = limit - #out
    local cands = {}
    for _, q in ipairs(queues) do
      local ms = redis.call('ZRANGE', k_ready(q), 0, want - 1, 'WITHSCORES')
      for i = 1, #ms, 2 do
        cands[#cands + 1] = {tonumber(ms[i + 1]), ms[i], q}
      end
    end
    if #cands == 0 then break end
    table.sort(cands, function(x, y) return order_lt(x[1], x[2], y[1], y[2]) end)
    for i = 1, math.min(want, #cands) do take(cands[i][3], cands[i][2]) end
  end
end
return out
