-- G14: is the instance registered (for a pinned enqueue)?
--
-- $1 instance id (text)
SELECT EXISTS (SELECT 1 FROM {schema}.instances WHERE id = $1)
