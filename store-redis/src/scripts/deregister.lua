-- Store::instance_deregister. ARGV: now, instance. Removes the instance and releases
-- its running items as eviction does (G12). Answers {released, registered 0/1}.
local now = tonumber(ARGV[1])
local id = ARGV[2]
local registered = redis.call('DEL', k_instance(id))
redis.call('ZREM', K_INST, id)
redis.call('ZREM', K_INST_SEEN, id)
redis.call('ZREM', K_INST_IDS, id)
unpin_owner(id)
return {release_owner(id, now), registered}
