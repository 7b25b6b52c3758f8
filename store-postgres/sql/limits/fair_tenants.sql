-- The finish tag and configured weight of tenants of fair queues (G18), under the
-- queues' locks. $1 queues, $2 tenants ('' for items without a fairness key)
-- (text[], pairwise).
SELECT t.queue, t.tenant, f.finish, w.value AS weight
FROM unnest($1::text[], $2::text[]) AS t(queue, tenant)
LEFT JOIN {schema}.fair_tenants f ON f.queue = t.queue AND f.tenant = t.tenant
LEFT JOIN {schema}.queue_limit_keys w
    ON w.queue = t.queue AND w.kind = 'weight' AND w.key = t.tenant
