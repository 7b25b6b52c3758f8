-- Retention (G9): deletes the rows of streams with no unfinished item. No parameters.
DELETE FROM {schema}.streams WHERE pending = 0
