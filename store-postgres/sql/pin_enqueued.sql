-- G14: a pinned enqueue pins its streams to the instance where they have no pin, or
-- one to an instance no longer registered (first write wins). The stream rows exist:
-- the enqueue reserved them.
--
-- $1 instance id (text)
-- $2 streams (text[])
UPDATE {schema}.streams st SET pinned_to = $1
WHERE st.stream = ANY($2::text[])
    AND (st.pinned_to IS NULL
         OR NOT EXISTS (SELECT 1 FROM {schema}.instances n
             WHERE n.id = st.pinned_to))
