-- Retention: deletes up to $2 done items finished at or before $1; answers how many.
--
-- $1 cutoff (int8 micros)
-- $2 the most rows to delete (int8)
WITH d AS (DELETE FROM {schema}.items WHERE id = ANY(ARRAY(
    SELECT id FROM {schema}.items WHERE state = 'done' AND updated_at <= $1
    LIMIT $2)) AND state = 'done' RETURNING 1)
SELECT count(*) FROM d
