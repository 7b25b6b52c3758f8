//! The statements of queue limits and fair shares (G16, G17, G18), one file each under
//! `sql/limits/`, loaded once per store by `sql.rs`'s loader (the schema substituted
//! for `{schema}`). Each file's header lists its parameters.

/// The statements of queue limits for one schema.
#[derive(Debug)]
pub(crate) struct LimitsSql {
    /// Whether a claim takes the limited path (`gate.sql`).
    pub(crate) gate: String,
    /// The claim locks of the claimed queues (`lock.sql`).
    pub(crate) lock: String,
    /// Each claimed queue's limits and counts (`queue_state.sql`).
    pub(crate) queue_state: String,
    /// Some limit keys' overrides and counts (`key_state.sql`).
    pub(crate) key_state: String,
    /// The claimable items of the open queues (`candidates.sql`).
    pub(crate) candidates: String,
    /// The claimable items of the open queues, in fair order (`candidates_fair.sql`).
    pub(crate) candidates_fair: String,
    /// The claimable items of the open queues, read key by key (`candidates_keys.sql`).
    pub(crate) candidates_keys: String,
    /// Marks an enqueue's unkeyed items of limited queues (`mark.sql`).
    pub(crate) mark: String,
    /// Marks a limited queue's unkeyed items (`mark_queue.sql`).
    pub(crate) mark_queue: String,
    /// Makes queues fair (`fair_make.sql`).
    pub(crate) fair_make: String,
    /// Tags the unfinished items of a queue made fair (`fair_backfill.sql`).
    pub(crate) fair_backfill: String,
    /// Locks fair queues for an enqueue (`fair_lock.sql`).
    pub(crate) fair_lock: String,
    /// Tenants' finish tags and weights (`fair_tenants.sql`).
    pub(crate) fair_tenants: String,
    /// Moves tenants' finish tags on (`fair_finish.sql`).
    pub(crate) fair_finish: String,
    /// Moves fair queues' virtual time on (`fair_served.sql`).
    pub(crate) fair_served: String,
    /// The claim of the admitted items (`take.sql`).
    pub(crate) take: String,
    /// Records the starts a claim consumed (`record_starts.sql`).
    pub(crate) record_starts: String,
    /// Forgets starts out of their window (`prune_starts.sql`).
    pub(crate) prune_starts: String,
    /// Keeps an enqueue's limit keys (`keys.sql`).
    pub(crate) keys: String,
    /// Writes a queue's limits (`set.sql`).
    pub(crate) set: String,
    /// Removes a queue's overrides and weights (`delete_keys.sql`).
    pub(crate) delete_keys: String,
    /// Adds overrides and weights (`insert_keys.sql`).
    pub(crate) insert_keys: String,
    /// Reads a queue's limits (`get.sql`).
    pub(crate) get: String,
    /// Reads a queue's overrides and weights (`get_keys.sql`).
    pub(crate) get_keys: String,
    /// Removes a queue's limits and their history (`clear.sql`).
    pub(crate) clear: String,
    /// The queues with limits (`list.sql`).
    pub(crate) list: String,
    /// Pushes a key's next start back (`defer.sql`).
    pub(crate) defer: String,
    /// When time alone frees a held-back item (`wait.sql`).
    pub(crate) wait: String,
}

impl LimitsSql {
    /// The statements for `schema` (a validated identifier).
    pub(crate) fn new(schema: &str) -> LimitsSql {
        // The same loader as `sql.rs`: comment lines dropped, one line, `{schema}` filled.
        let s = |text: &str| crate::sql::load(text, schema);
        LimitsSql {
            gate: s(include_str!("../../sql/limits/gate.sql")),
            lock: s(include_str!("../../sql/limits/lock.sql")),
            queue_state: s(include_str!("../../sql/limits/queue_state.sql")),
            key_state: s(include_str!("../../sql/limits/key_state.sql")),
            candidates: s(include_str!("../../sql/limits/candidates.sql")),
            candidates_fair: s(include_str!("../../sql/limits/candidates_fair.sql")),
            candidates_keys: s(include_str!("../../sql/limits/candidates_keys.sql")),
            mark: s(include_str!("../../sql/limits/mark.sql")),
            mark_queue: s(include_str!("../../sql/limits/mark_queue.sql")),
            fair_make: s(include_str!("../../sql/limits/fair_make.sql")),
            fair_backfill: s(include_str!("../../sql/limits/fair_backfill.sql")),
            fair_lock: s(include_str!("../../sql/limits/fair_lock.sql")),
            fair_tenants: s(include_str!("../../sql/limits/fair_tenants.sql")),
            fair_finish: s(include_str!("../../sql/limits/fair_finish.sql")),
            fair_served: s(include_str!("../../sql/limits/fair_served.sql")),
            take: s(include_str!("../../sql/limits/take.sql")),
            record_starts: s(include_str!("../../sql/limits/record_starts.sql")),
            prune_starts: s(include_str!("../../sql/limits/prune_starts.sql")),
            keys: s(include_str!("../../sql/limits/keys.sql")),
            set: s(include_str!("../../sql/limits/set.sql")),
            delete_keys: s(include_str!("../../sql/limits/delete_keys.sql")),
            insert_keys: s(include_str!("../../sql/limits/insert_keys.sql")),
            get: s(include_str!("../../sql/limits/get.sql")),
            get_keys: s(include_str!("../../sql/limits/get_keys.sql")),
            clear: s(include_str!("../../sql/limits/clear.sql")),
            list: s(include_str!("../../sql/limits/list.sql")),
            defer: s(include_str!("../../sql/limits/defer.sql")),
            wait: s(include_str!("../../sql/limits/wait.sql")),
        }
    }
}
