-- Fragment {stall_set}: the effect of machine::stall (used by recover, evict and
-- deregister) as the SET clauses of an UPDATE of `items i`.
-- $1 now
stalls = i.stalls + 1, owner = NULL, lease_expires_at = NULL,
updated_at = $1,
state = CASE WHEN i.stalls + 1 >= i.max_stalls THEN 'dead' ELSE 'ready' END,
run_at = CASE WHEN i.stalls + 1 >= i.max_stalls THEN i.run_at ELSE $1 END,
last_error = CASE WHEN i.stalls + 1 >= i.max_stalls
    THEN 'stalled: lease expired ' || (i.stalls + 1) || ' times' ELSE i.last_error END
