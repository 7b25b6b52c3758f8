-- Store::release. ARGV: now, then triples id, attempt, lease id. Answers per token 1 accepted,
-- 0 lease lost (G3). An accepted item is ready at `now`, keeping its attempt and
-- stalls; max_attempts goes up by one so a release uses up no attempt (G5).
local now = tonumber(ARGV[1])
local out = {}
local left = {}
for i = 2, #ARGV, 3 do
  local id = ARGV[i]
  local h = load(id)
  if not is_current(h, tonumber(ARGV[i + 1]), ARGV[i + 2]) then
    out[#out + 1] = 0
  else
    if h.st then put_back_after(h.st, h.sq, now) end
    unlink_running(h)
    left[h.q] = true
    h.ma = h.ma + 1
    h.ra = now
    become_ready(h, now)
    out[#out + 1] = 1
  end
end
slots_freed(left)
return out
