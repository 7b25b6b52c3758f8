-- Store::item_get. ARGV: id. Answers the item's fields (HGETALL form), empty when
-- there is no such item.
return redis.call('HGETALL', k_item(ARGV[1]))
