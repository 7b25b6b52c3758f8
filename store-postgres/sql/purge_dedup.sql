-- Retention (G11): deletes up to $2 dedup keys whose window ended at or before $1;
-- answers how many.
--
-- $1 now (int8 micros)
-- $2 the most rows to delete (int8)
WITH d AS (DELETE FROM {schema}.dedup_keys k USING (
    SELECT queue, key FROM {schema}.dedup_keys WHERE expires_at <= $1 LIMIT $2) x
    WHERE k.queue = x.queue AND k.key = x.key AND k.expires_at <= $1
    RETURNING 1)
SELECT count(*) FROM d
