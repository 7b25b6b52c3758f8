-- Fragment {item_cols}: the columns of an item, as every read and RETURNING lists
-- them (alias `i`), in the order `rows::item` reads them.
i.id, i.seq, i.queue, i.payload, i.stream, i.scope,
i.dedup_key, i.priority, i.run_at, i.state, i.attempt, i.owner, i.lease_expires_at,
i.renewals, i.stalls, i.max_attempts, i.max_stalls, i.max_renewals, i.last_error,
i.created_at, i.updated_at, i.lease
