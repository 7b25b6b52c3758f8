-- Removes the per-key overrides and weights of queue $1.
DELETE FROM {schema}.queue_limit_keys WHERE queue = $1
