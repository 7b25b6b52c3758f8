-- Lease ids (G3): every claim mints a random 64-bit id for its lease, and every fence
-- checks it beside the attempt.
--
-- The attempt number alone fences only while the database remembers every claim. A
-- standby promoted after an asynchronous primary died has not seen the claims the old
-- primary committed last; it hands the same attempt number out again, and a token of
-- (id, attempt) would validate both the lost lease and the new one. The lease id is
-- drawn by the claimer, not derived from the row, so the new lease's id differs and the
-- old token is refused.
--
-- A constant default makes the new column a catalog change (no table rewrite, a brief
-- ACCESS EXCLUSIVE lock only). Rows running at upgrade keep lease 0, which no claim
-- mints: the code that granted them sent no lease id, and they finish or recover by
-- expiry as before.
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS lease bigint NOT NULL DEFAULT 0;

-- complete() fenced on (id, attempt, lease, state = 'running'). A new overload: code of
-- migration 5 that still runs during a rolling deploy keeps calling the four-argument
-- function, which stays.
CREATE FUNCTION __SCHEMA__.tenure_complete(
    p_now bigint, p_ids uuid[], p_attempts integer[], p_leases bigint[], p_keep_done boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_ids uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE __SCHEMA__.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = 'running'
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM __SCHEMA__.items i
            USING unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = 'running'
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    END IF;

    IF v_heads IS NOT NULL THEN
        PERFORM __SCHEMA__.tenure_promote(v_heads);
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$fn$;
