-- A claim served items of fair queues up to these start tags plus one (G18): each
-- queue's virtual time follows. $1 queues (text[]), $2 the greatest tag served in
-- each (int8[], pairwise).
UPDATE {schema}.fair_queues f SET vtime = greatest(f.vtime, t.ftag - 1)
FROM unnest($1::text[], $2::int8[]) AS t(queue, ftag)
WHERE f.queue = t.queue
