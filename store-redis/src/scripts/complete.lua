-- Store::complete. ARGV: now, keep_done (0/1), then pairs id, attempt. Answers per
-- token 1 accepted, 0 lease lost (G3). An accepted item leaves its stream, whose next
-- item becomes the head (G9), and is deleted, or kept as `done` until purged.
local now = tonumber(ARGV[1])
local keep = ARGV[2] == '1'
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local h = load_running(id)
  if not is_current(h, tonumber(ARGV[i + 1])) then
    out[#out + 1] = 0
  else
    unlink_running(h)
    stream_leave(h, now)
    if keep then
      redis.call('HSET', k_item(id), 's', 'done', 'ua', N(now))
      redis.call('HDEL', k_item(id), 'o', 'le')
      redis.call('ZADD', k_done(h.q), N(now), id)
    else
      -- A running item is in no index but its queue's running set and its owner's,
      -- both left above.
      redis.call('DEL', k_item(id))
    end
    out[#out + 1] = 1
  end
end
return out
