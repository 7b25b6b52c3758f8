-- Store::fail. ARGV: now, then quadruples id, attempt, lease id, retry delay (µs, or
-- -1 for a permanent failure), then the errors in the same order. Answers per failure
-- {1, run_at} retrying, {2} dead, {0} lease lost (G3, G5).
local now = tonumber(ARGV[1])
local n = (#ARGV - 1) / 5
local out = {}
local left = {}
for j = 1, n do
  local b = 2 + (j - 1) * 4
  local id = ARGV[b]
  local delay = tonumber(ARGV[b + 3])
  local err = ARGV[1 + 4 * n + j]
  local h = load(id)
  if not is_current(h, tonumber(ARGV[b + 1]), ARGV[b + 2]) then
    out[#out + 1] = {0}
  else
    if h.st then put_back_after(h.st, h.sq, now) end
    unlink_running(h)
    left[h.q] = true
    h.e = err
    redis.call('HSET', k_item(id), 'e', err)
    if delay >= 0 and h.a < h.ma then
      h.ra = now + delay
      become_ready(h, now)
      out[#out + 1] = {1, h.ra}
    else
      become_dead(h, now)
      out[#out + 1] = {2}
    end
  end
end
slots_freed(left)
return out
