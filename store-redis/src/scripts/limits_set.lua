-- Store::limits_set. ARGV: queue, c, kc, rs, rp, krs, krp ('' when unset; periods in
-- µs), the count of overrides, their (key, n) pairs, the count of weights, their
-- (key, w) pairs. Replaces the queue's limits; answers what it had (limits_of), or
-- nil. Its rate history stays: the starts of the last period still count.
ensure_layout()
local q = ARGV[1]
local before = limits_of(q)
redis.call('DEL', k_lim(q), k_lover(q), k_lweight(q))
local fields = {'set', '1'}
local names = {'c', 'kc', 'rs', 'rp', 'krs', 'krp'}
for i = 1, 6 do
  if ARGV[1 + i] ~= '' then
    fields[#fields + 1] = names[i]
    fields[#fields + 1] = ARGV[1 + i]
  end
end
redis.call('HSET', k_lim(q), unpack(fields))
local at = 8
local n = tonumber(ARGV[at])
if n > 0 then redis.call('HSET', k_lover(q), unpack(ARGV, at + 1, at + 2 * n)) end
at = at + 2 * n + 1
n = tonumber(ARGV[at])
if n > 0 then redis.call('HSET', k_lweight(q), unpack(ARGV, at + 1, at + 2 * n)) end
redis.call('SADD', K_LIMQ, q)
-- Raised limits may free slots: waiting workers claim again.
-- Parked keys may open under the new limits (G16).
unpark_all(q)
redis.call('SPUBLISH', K_WAKE, '1')
return before
