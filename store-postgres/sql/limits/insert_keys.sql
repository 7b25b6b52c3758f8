-- Adds per-key overrides and weights to queue $1: $2 kinds ('override' or 'weight'),
-- $3 keys, $4 values (pairwise arrays).
INSERT INTO {schema}.queue_limit_keys (queue, kind, key, value)
SELECT $1, t.kind, t.key, t.value
FROM unnest($2::text[], $3::text[], $4::int8[]) AS t(kind, key, value)
