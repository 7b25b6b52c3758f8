-- Registers an instance, or moves its last heartbeat forward (never back).
--
-- $1 instance id (text)
-- $2 now (int8 micros)
INSERT INTO {schema}.instances AS n (id, started_at, last_seen) VALUES ($1, $2, $2)
ON CONFLICT (id) DO UPDATE SET last_seen = GREATEST(n.last_seen, $2)
