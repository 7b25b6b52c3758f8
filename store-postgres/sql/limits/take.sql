-- machine::claim on the items a limited claim admitted, for owner $3 at $2, lease
-- expiry $4, lease id $5. $1 ids (uuid[]).
UPDATE {schema}.items i SET state = 'running', attempt = i.attempt + 1,
    owner = $3, lease_expires_at = $4, renewals = 0, updated_at = $2, lease = $5
WHERE i.id = ANY($1::uuid[]) AND i.state = 'ready'
RETURNING i.id, i.seq, i.queue, i.payload, i.stream, i.scope, i.dedup_key, i.priority,
    i.run_at, i.state, i.attempt, i.owner, i.lease_expires_at, i.renewals, i.stalls,
    i.max_attempts, i.max_stalls, i.max_renewals, i.last_error, i.created_at,
    i.updated_at, i.lease
