-- Records one start per entry of the rates a limited claim consumed, in its
-- transaction: the queue's own under the key '', a limit key's under its name.
-- $1 queues (text[]), $2 keys (text[], pairwise), $3 now (micros).
INSERT INTO {schema}.limit_starts (queue, key, at)
SELECT t.queue, t.key, $3 FROM unnest($1::text[], $2::text[]) AS t(queue, key)
