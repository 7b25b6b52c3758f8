-- Store::item_cancel. ARGV: now, ids... Deletes ready items (due or not): out of the
-- claim indexes, out of their stream (a cancelled head lets the next one be placed,
-- G9); the dedup key stays (G11). Answers per id {'cancelled'}, {'running', attempt,
-- owner}, {'dead'}, {'done'} or {'none'}.
ensure_layout()
local now = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local h = load(ARGV[i])
  if not h then
    out[#out + 1] = {'none'}
  elseif h.s == 'ready' then
    if is_stream_head(h) then unplace(h) else redis.call('ZREM', k_hold(h.q), h.id) end
    stream_leave(h, now)
    redis.call('ZREM', k_readyat(h.q), h.id)
    redis.call('DEL', k_item(h.id))
    redis.call('ZREM', k_all(h.q), h.id)
    out[#out + 1] = {'cancelled'}
  elseif h.s == 'running' then
    out[#out + 1] = {'running', N(h.a), h.o or ''}
  else
    out[#out + 1] = {h.s}
  end
end
return out
