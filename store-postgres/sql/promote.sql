-- G9: the next waiting item of each stream (streams whose head this transaction
-- finished) becomes its head, or the stream's row is set empty (migration 0005).
-- Runs after the finish, in statements of its own.
--
-- $1 streams (text[])
SELECT {schema}.tenure_promote($1::text[])
