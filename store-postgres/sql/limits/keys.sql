-- Keeps the limit key, fairness key, weight and start tag of items an enqueue
-- inserted, in the enqueue's transaction, before anything can claim them.
-- $1 ids (uuid[]), $2 limit keys, $3 fairness keys (text[], NULL for none),
-- $4 weights (int4[]), $5 start tags plus one (int8[], NULL outside a fair queue).
UPDATE {schema}.items i SET limit_key = t.limit_key, fairness_key = t.fairness_key,
    weight = t.weight, ftag = t.ftag
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::int8[])
    AS t(id, limit_key, fairness_key, weight, ftag)
WHERE i.id = t.id
