-- Of a complete's tokens, those still current (running at that attempt and lease)
-- though not completed: refused as out of stream order (G9). On
-- `(SELECT 'running'::text)`, see renew.sql.
--
-- $1 ids (uuid[])
-- $2 attempts (int4[])
-- $3 lease ids (int8[])
SELECT i.id FROM {schema}.items i
JOIN unnest($1::uuid[], $2::int4[], $3::int8[]) AS t(id, attempt, lease)
    ON i.id = t.id AND i.attempt = t.attempt AND i.lease = t.lease
WHERE i.id = ANY($1::uuid[]) AND i.state = (SELECT 'running'::text)
