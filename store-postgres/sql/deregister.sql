-- Store::instance_deregister: the instance leaves at once, and machine::evict applies
-- to whatever it still runs, as in evict.sql. G14: its streams are unpinned,
-- registered or not.
--
-- $1 now (int8 micros)
-- $2 instance id (text)
WITH ev AS (
    DELETE FROM {schema}.instances WHERE id = $2 RETURNING id
), unpin AS (
    UPDATE {schema}.streams SET pinned_to = NULL WHERE pinned_to = $2
), st AS (
    UPDATE {schema}.items i SET {stall_set}
    WHERE i.state = 'running' AND i.owner = $2
        AND (i.head OR i.stream IS NULL)
    RETURNING 1
), pb AS (
    UPDATE {schema}.items i SET state = 'ready', owner = NULL, lease_expires_at = NULL,
        max_attempts = i.max_attempts + 1, updated_at = $1
    WHERE i.state = 'running' AND i.owner = $2
        AND NOT i.head AND i.stream IS NOT NULL
)
SELECT ARRAY(SELECT id FROM ev), (SELECT count(*) FROM st)
