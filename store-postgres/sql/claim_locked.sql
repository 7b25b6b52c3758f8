-- The second pass of a claim, for one row it recovered itself but found locked when
-- it picked (a stale finalize racing the recovery holds the row until its fence fails
-- and it commits): a plain UPDATE that waits for the lock and re-checks the row, so a
-- row another claimer took is left alone and a row still claimable is claimed. One
-- row per statement, so it never holds one lock while waiting for another. The scope
-- index stays the backstop for G10.
--
-- $1 ids (uuid[], one)
-- $2 now (int8 micros)
-- $3 queues (text[])
-- $4 owner (text)
-- $5 lease expiry (int8 micros)
-- $6 lease id (int8)
UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
    owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2,
    lease = $6
WHERE i.id = ANY($1::uuid[]) AND i.state = 'ready' AND i.head
    AND i.run_at <= $2 AND i.queue = ANY($3::text[])
    AND NOT EXISTS (SELECT 1 FROM {schema}.paused_queues z WHERE z.queue = i.queue)
    AND (i.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.items r
        WHERE r.scope = i.scope AND r.state = 'running'))
RETURNING {item_cols}
