-- Store::limits_get. ARGV: queue. Answers its limits (lib.lua's limits_of) or nil.
return limits_of(ARGV[1])
