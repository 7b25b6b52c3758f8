-- G9: count the new items of each stream and lock its row (streams sorted).
-- `pending` is 0 for a stream with no unfinished item and more otherwise (migration
-- 0005); it is read from the latest row version even after a lock wait, so
-- `pending - added == 0` means the stream had none.
--
-- $1 streams (text[], sorted)
-- $2 the number of items each gains (int8[])
INSERT INTO {schema}.streams AS st (stream, pending)
SELECT t.stream, t.added FROM unnest($1::text[], $2::int8[])
    WITH ORDINALITY AS t(stream, added, ord) ORDER BY t.ord
ON CONFLICT (stream) DO UPDATE SET pending = st.pending + EXCLUDED.pending
RETURNING st.stream, st.pending
