-- Store::history_add, after the add: deletes at most $2 minutes older than $1, the
-- oldest first, through the minute index.
--
-- $1 keep from (int8 micros: the newest minute added minus HISTORY_KEEP)
-- $2 most rows deleted (int8)
DELETE FROM {schema}.history
WHERE (queue, minute) IN (
    SELECT queue, minute FROM {schema}.history WHERE minute < $1 ORDER BY minute LIMIT $2)
