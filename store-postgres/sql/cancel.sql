-- Store::item_cancel: ready rows are deleted, and the streams whose head was deleted
-- come back (second column) for promote.sql.
--
-- $1 now (int8 micros, unused but for the shape shared with discard)
-- $2 ids (uuid[])
DELETE FROM {schema}.items i WHERE i.id = ANY($2::uuid[]) AND i.state = 'ready'
    AND $1::int8 IS NOT NULL
RETURNING i.id, CASE WHEN i.head THEN i.stream END
