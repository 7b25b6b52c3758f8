-- A queue just made fair (G18): its unfinished items from before get tag 1, the
-- oldest. $1 queues (text[]).
UPDATE {schema}.items SET ftag = 1
WHERE queue = ANY($1::text[]) AND ftag IS NULL AND state <> 'done'
