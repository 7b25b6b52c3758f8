-- One item by id, with its progress (migration 16; claims leave it out).
--
-- $1 id (uuid)
SELECT {item_cols}, i.progress FROM {schema}.items i WHERE i.id = $1
