-- Store::dead_requeue. ARGV: now, additional attempts, ids... Puts dead items back to
-- ready at `now`, keeping the attempt, resetting stalls, and raising max_attempts to at
-- least attempt + additional (G5). Answers how many changed.
ensure_layout()
local now = tonumber(ARGV[1])
local add = tonumber(ARGV[2])
local n = 0
for i = 3, #ARGV do
  local h = load(ARGV[i])
  if h and h.s == 'dead' then
    redis.call('ZREM', k_dead(h.q), dead_member(h))
    h.ma = math.max(h.ma, h.a + add)
    h.s, h.sl, h.ra, h.ua = 'ready', 0, now, now
    redis.call('HSET', k_item(h.id), 's', state_of(h), 'n', numbers_of(h))
    redis.call('ZADD', k_readyat(h.q), N(now), h.id)
    if is_stream_head(h) then place(h, now) end
    n = n + 1
  end
end
return n
