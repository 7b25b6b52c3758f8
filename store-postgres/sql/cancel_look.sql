-- Store::item_cancel: what became of the ids a cancel did not delete.
--
-- $1 ids (uuid[])
SELECT i.id, i.state, i.attempt, i.owner FROM {schema}.items i
WHERE i.id = ANY($1::uuid[])
