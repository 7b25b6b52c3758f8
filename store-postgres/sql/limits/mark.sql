-- Marks the items an enqueue inserted without a limit key whose queue has limits
-- (`lq`, migration 13), in the enqueue's transaction, so the claim's key walk sees
-- them. $1 ids (uuid[]).
UPDATE {schema}.items i SET lq = true
WHERE i.id = ANY($1::uuid[]) AND i.limit_key IS NULL
    AND EXISTS (SELECT 1 FROM {schema}.queue_limits l WHERE l.queue = i.queue)
