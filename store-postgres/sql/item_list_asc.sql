-- Store::item_list, oldest first: a page of a queue's items in one state through
-- `items_list` (queue, state, seq), from the cursor's seq, without FOR UPDATE.
--
-- $1 queue (text)
-- $2 state (text)
-- $3 due filter (int4: 0 any, 1 due, 2 not due)
-- $4 now (int8 micros)
-- $5 the cursor's seq, exclusive (int8)
-- $6 the most rows (int8)
SELECT {item_cols}, i.progress FROM {schema}.items i
WHERE i.queue = $1 AND i.state = $2 AND i.seq > $5
    AND ($3 = 0 OR ($3 = 1 AND i.run_at <= $4) OR ($3 = 2 AND i.run_at > $4))
ORDER BY i.seq ASC LIMIT $6
