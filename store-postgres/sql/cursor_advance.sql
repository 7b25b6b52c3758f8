-- The claim cursors of some queues move to their first visible ready head
-- (migration 9). In a transaction of its own.
--
-- $1 now, the store's clock (int8 micros)
-- $2 queues (text[])
SELECT {schema}.tenure_cursor_advance($1, $2::text[])
