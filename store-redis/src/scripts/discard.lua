-- Store::dead_discard. ARGV: now, ids... Deletes dead items; a discarded head no
-- longer blocks its stream (G5, G9). Answers how many were deleted.
ensure_layout()
local now = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local h = load(ARGV[i])
  if h and h.s == 'dead' then
    stream_leave(h, now)
    delete(h)
    n = n + 1
  end
end
return n
