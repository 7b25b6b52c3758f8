-- No start of queue $1's items of key $2 ('' for all of them) before $3 (micros); a
-- later deferral never shortens an earlier one.
INSERT INTO {schema}.limit_defers AS d (queue, key, until) VALUES ($1, $2, $3)
ON CONFLICT (queue, key) DO UPDATE SET until = greatest(d.until, EXCLUDED.until)
