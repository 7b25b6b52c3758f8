-- Keeps the limit key, fairness key and weight of items an enqueue inserted, in the
-- enqueue's transaction, before anything can claim them.
-- $1 ids (uuid[]), $2 limit keys, $3 fairness keys (text[], NULL for none),
-- $4 weights (int4[]).
UPDATE {schema}.items i SET limit_key = t.limit_key, fairness_key = t.fairness_key,
    weight = t.weight
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[])
    AS t(id, limit_key, fairness_key, weight)
WHERE i.id = t.id
