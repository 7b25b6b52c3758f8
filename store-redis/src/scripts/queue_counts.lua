-- Store::queue_counts. ARGV: now, queue. Answers {ready and due, scheduled, running,
-- dead, done}; each is one index's size, nothing is scanned.
local now = tonumber(ARGV[1])
local q = ARGV[2]
local all = redis.call('ZCARD', k_readyall(q))
local due = redis.call('ZCOUNT', k_readyall(q), '-inf', N(now))
return {due, all - due, redis.call('ZCARD', k_run(q)), redis.call('SCARD', k_dead(q)),
  redis.call('ZCARD', k_done(q))}
