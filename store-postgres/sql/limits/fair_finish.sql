-- Moves tenants' finish tags on after an enqueue tagged their items (G18).
-- $1 queues, $2 tenants (text[], pairwise), $3 finish tags (int8[]).
INSERT INTO {schema}.fair_tenants AS f (queue, tenant, finish)
SELECT t.queue, t.tenant, t.finish
FROM unnest($1::text[], $2::text[], $3::int8[]) AS t(queue, tenant, finish)
ON CONFLICT (queue, tenant) DO UPDATE SET finish = EXCLUDED.finish
