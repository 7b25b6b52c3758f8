-- G14 partitioned claiming: each item's partition hash, and each stream's pin.
--
-- Every statement here is quick on a table of any size: the new columns are nullable
-- without a default (a catalog change, no rewrite), and nothing is back-filled.

-- tenure_core::partition::key_hash of the item's stream key (or of its id), computed in
-- Rust at enqueue. NULL for rows written before this migration, or by code older than
-- it during a rolling deploy; a partitioned claim computes their hash with
-- tenure_key_hash below, which gives the same value, so no row needs a back-fill (one
-- would hold this migration's lock on the hot table for as long as it ran).
ALTER TABLE __SCHEMA__.items ADD COLUMN phash bigint;

-- The instance a stream is pinned to, or NULL. On the stream's bookkeeping row, which
-- exists while the stream has unfinished items, so a pin goes when purge drops the row
-- of a stream with none left. A partitioned claim sets it (only where it is NULL, or
-- names an instance no longer registered); eviction and deregistration clear it.
ALTER TABLE __SCHEMA__.streams ADD COLUMN pinned_to text;

-- Eviction and deregistration find an instance's pins here. Only pinned rows are in
-- it, and `pending` is not in it, so the count updates of enqueue and finish stay HOT.
CREATE INDEX streams_pinned ON __SCHEMA__.streams (pinned_to)
    WHERE pinned_to IS NOT NULL;

-- tenure_core::partition::key_hash in SQL: FNV-1a 64 over the UTF-8 bytes of the
-- stream key, or over the 16 bytes of the id (uuid_send, the UUID's byte order) when
-- there is no stream, with the top bit cleared. numeric keeps the 64-bit wrap-around
-- exact; the XOR of a byte touches only the low 8 bits. Slow next to Rust, and only
-- used for rows whose `phash` is NULL.
CREATE FUNCTION __SCHEMA__.tenure_key_hash(p_stream text, p_id uuid) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    b  bytea := CASE WHEN p_stream IS NULL THEN uuid_send(p_id)
                     ELSE convert_to(p_stream, 'UTF8') END;
    h  numeric := 14695981039346656037;
    lo integer;
BEGIN
    FOR k IN 0 .. length(b) - 1 LOOP
        lo := (h % 256)::integer;
        h := h - lo + (lo # get_byte(b, k));
        h := (h * 1099511628211) % 18446744073709551616;
    END LOOP;
    RETURN (h % 9223372036854775808)::bigint;
END;
$fn$;
