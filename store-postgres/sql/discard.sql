-- machine::discard: dead items are deleted, followed in the same transaction by
-- promote.sql for the streams whose head was among them (the second column).
--
-- $1 now (int8 micros, unused but for the shape shared with cancel)
-- $2 ids (uuid[])
DELETE FROM {schema}.items i WHERE i.id = ANY($2::uuid[]) AND i.state = 'dead'
    AND $1::int8 IS NOT NULL
RETURNING i.id, CASE WHEN i.head THEN i.stream END
