-- One item by id.
--
-- $1 id (uuid)
SELECT {item_cols} FROM {schema}.items i WHERE i.id = $1
