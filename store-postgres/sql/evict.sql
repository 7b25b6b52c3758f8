-- machine::evict over every running item of the instances whose last heartbeat is at
-- or before the cutoff: heads and items outside streams stall ({stall_set}), the
-- items of their runs behind them go back to ready untouched (machine::put_back;
-- every running item that is not a head is such an item, and its head is the same
-- owner's). G14: the evicted instances' streams are unpinned. Answers the evicted
-- ids and the number of stalled items.
--
-- $1 now (int8 micros)
-- $2 heartbeat cutoff (int8 micros)
WITH ev AS (
    DELETE FROM {schema}.instances WHERE last_seen <= $2 RETURNING id
), unpin AS (
    UPDATE {schema}.streams SET pinned_to = NULL
    WHERE pinned_to IN (SELECT id FROM ev)
), st AS (
    UPDATE {schema}.items i SET {stall_set}
    WHERE i.state = 'running' AND i.owner IN (SELECT id FROM ev)
        AND (i.head OR i.stream IS NULL)
    RETURNING 1
), pb AS (
    UPDATE {schema}.items i SET state = 'ready', owner = NULL, lease_expires_at = NULL,
        max_attempts = i.max_attempts + 1, updated_at = $1
    WHERE i.state = 'running' AND i.owner IN (SELECT id FROM ev)
        AND NOT i.head AND i.stream IS NOT NULL
)
SELECT ARRAY(SELECT id FROM ev ORDER BY id), (SELECT count(*) FROM st)
