-- The per-key overrides and weights of queue $1, by kind and key.
SELECT kind, key, value FROM {schema}.queue_limit_keys WHERE queue = $1 ORDER BY kind, key
