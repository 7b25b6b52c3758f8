-- The registered instances, oldest first. No parameters.
SELECT id, started_at, last_seen FROM {schema}.instances ORDER BY started_at, id
