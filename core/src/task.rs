//! Typed tasks: a Rust value enqueued as its JSON payload on the queue its type names,
//! and handled as that value.
//!
//! A [`Task`] is a serde type that declares, once, the queue its values go to and the
//! defaults of the items they become (priority, attempts, a dedup, stream or scope key
//! derived from the value), and for the worker that runs it a retry policy and a
//! lease. [`StoreExt::enqueue_task`](crate::StoreExt::enqueue_task) enqueues a value,
//! [`StoreExt::enqueue_task_with`](crate::StoreExt::enqueue_task_with) with
//! [`TaskOptions`] for one enqueue; [`NewItem::task`] builds the item for a batch or a
//! transaction (`enqueue_task_in_tx` on the SQLite and PostgreSQL stores). How a task
//! runs is the worker's side (crate `tenure-runtime`): `RunTask` and
//! `WorkerBuilder::task`, or `WorkerBuilder::task_with` for a handler that keeps state.

use std::any::type_name;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::{DedupKey, FairnessKey, LimitKey, QueueName, ScopeKey, StreamKey};
use crate::model::{NewItem, Schedule, DEFAULT_MAX_ATTEMPTS};
use crate::retry::RetryPolicy;
use crate::time::Timestamp;

/// A kind of work declared as a Rust type: its values are enqueued as JSON on
/// [`Task::QUEUE`] and decoded back into the type for its handler.
///
/// Only [`QUEUE`](Task::QUEUE) must be given; everything else has a default. The
/// item defaults apply to every value of the type and can be overridden for one
/// enqueue with [`TaskOptions`].
///
/// # Behavior
///
/// - A value that does not encode as JSON (for example a map whose keys are not
///   strings) is refused at enqueue with [`Error::InvalidInput`] naming `payload` and
///   the type, and nothing is written. So is an invalid [`QUEUE`](Task::QUEUE) (field
///   `queue`) or a key method that answers an error.
/// - A worker decodes the payload of each item of the queue as this type; a payload
///   that does not decode (written by other code, or by an older version of the type)
///   is a permanent failure: the item goes dead at once (G5) with a `last_error` that
///   names the type and the serde error.
/// - The payload is the value's JSON, the same bytes as
///   [`StoreExt::enqueue_json`](crate::StoreExt::enqueue_json) writes, so producers in
///   other languages or older code can enqueue for a task by writing that JSON.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tenure_core::{DedupKey, Result, StoreExt, Task};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail {
///     to: String,
///     order: u64,
/// }
///
/// impl Task for SendEmail {
///     const QUEUE: &'static str = "emails";
///     const MAX_ATTEMPTS: u32 = 5;
///
///     // One mail per order, however often the order is saved (G11).
///     fn dedup_key(&self) -> Result<Option<DedupKey>> {
///         Ok(Some(DedupKey::new(format!("order-mail:{}", self.order))?))
///     }
/// }
///
/// # async fn demo(store: &dyn tenure_core::Store) -> Result<()> {
/// let mail = SendEmail { to: "ada@example.com".into(), order: 42 };
/// store.enqueue_task(&mail).await?;
/// # Ok(())
/// # }
/// ```
///
/// Only a task can be enqueued as one: a serde value that is not a `Task` has no
/// queue, and the call does not compile.
///
/// ```compile_fail,E0277
/// # async fn demo(store: &dyn tenure_core::Store) -> tenure_core::Result<()> {
/// use tenure_core::StoreExt;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct NotATask {
///     to: String,
/// }
///
/// store.enqueue_task(&NotATask { to: "ada@example.com".into() }).await?;
/// # Ok(())
/// # }
/// ```
pub trait Task: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The queue the values go to and are claimed from: one task type per queue in a
    /// worker. A valid [`QueueName`]; an invalid one is refused at enqueue and when a
    /// worker spawns.
    const QUEUE: &'static str;

    /// The priority of a new item (G8; smaller runs first). Default 0.
    const PRIORITY: i16 = 0;

    /// The attempts a new item is allowed (G5). Default
    /// [`DEFAULT_MAX_ATTEMPTS`](crate::DEFAULT_MAX_ATTEMPTS).
    const MAX_ATTEMPTS: u32 = DEFAULT_MAX_ATTEMPTS;

    /// The lease this task needs at least (runtime). A worker claims all its queues in
    /// one claim, for one lease length: the longest of its own
    /// `WorkerBuilder::lease_duration` and the `LEASE` of the
    /// tasks it runs. Default `None`: the worker's.
    const LEASE: Option<Duration> = None;

    /// The delay policy of this task's retryable failures (runtime), for a failure its
    /// handler returns without a delay of its own. Default `None`: the worker's
    /// `WorkerBuilder::retry` policy, which also times the retries of
    /// a panic or a handler timeout.
    fn retry_policy() -> Option<RetryPolicy> {
        None
    }

    /// The dedup key of the value's item (G11): a second enqueue with the same key
    /// within the dedup window inserts nothing and answers the first item's id. Default
    /// none. An error refuses the enqueue.
    fn dedup_key(&self) -> Result<Option<DedupKey>> {
        Ok(None)
    }

    /// The stream of the value's item (G9: strict order among the items of one
    /// stream). Default none. An error refuses the enqueue.
    fn stream(&self) -> Result<Option<StreamKey>> {
        Ok(None)
    }

    /// The scope of the value's item (G10: at most one running item per scope).
    /// Default none. An error refuses the enqueue.
    fn scope(&self) -> Result<Option<ScopeKey>> {
        Ok(None)
    }

    /// The limit key of the value's item (G16, G17: its queue's per-key concurrency
    /// and rate limits count it under this key). Default none. An error refuses the
    /// enqueue.
    fn limit_key(&self) -> Result<Option<LimitKey>> {
        Ok(None)
    }

    /// The tenant of the value's item (G18: fair shares). Default none. An error
    /// refuses the enqueue.
    fn fairness_key(&self) -> Result<Option<FairnessKey>> {
        Ok(None)
    }

    /// The tenant's weight the value's item declares (G18; 1..=10 000). Default 1.
    fn weight(&self) -> u32 {
        1
    }
}

/// The queue of task type `T`, checked; an invalid [`Task::QUEUE`] is an
/// [`Error::InvalidInput`] naming `queue` and the type.
pub fn task_queue<T: Task>() -> Result<QueueName> {
    QueueName::new(T::QUEUE).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid(
            "queue",
            format!("{}::QUEUE {:?}: {reason}", type_name::<T>(), T::QUEUE),
        ),
        other => other,
    })
}

/// Options for one enqueue of a [`Task`], over the task's defaults: when it runs, its
/// keys, priority and attempts. Every option left unset keeps the task's default.
///
/// ```
/// # use std::time::Duration;
/// # use tenure_core::{StreamKey, TaskOptions};
/// # fn demo() -> tenure_core::Result<()> {
/// let options = TaskOptions::new()
///     .delay(Duration::from_secs(60))
///     .stream(StreamKey::new("customer-7")?)
///     .priority(-1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskOptions {
    schedule: Option<Schedule>,
    dedup_key: Option<DedupKey>,
    dedup_window: Option<Duration>,
    stream: Option<StreamKey>,
    scope: Option<ScopeKey>,
    priority: Option<i16>,
    max_attempts: Option<u32>,
    limit_key: Option<LimitKey>,
    fairness_key: Option<FairnessKey>,
    weight: Option<u32>,
}

impl TaskOptions {
    /// No option: the task's defaults.
    pub fn new() -> Self {
        TaskOptions::default()
    }

    /// Claimable at `at` and not before (G7).
    pub fn run_at(mut self, at: Timestamp) -> Self {
        self.schedule = Some(Schedule::At(at));
        self
    }

    /// Claimable `delay` after it is enqueued (G7).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.schedule = Some(Schedule::After(delay));
        self
    }

    /// This dedup key (G11) instead of the task's [`Task::dedup_key`].
    pub fn dedup_key(mut self, key: DedupKey) -> Self {
        self.dedup_key = Some(key);
        self
    }

    /// How long the dedup key is remembered (1 s ..= 366 days; default 30 days).
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = Some(window);
        self
    }

    /// This stream (G9) instead of the task's [`Task::stream`].
    pub fn stream(mut self, stream: StreamKey) -> Self {
        self.stream = Some(stream);
        self
    }

    /// This scope (G10) instead of the task's [`Task::scope`].
    pub fn scope(mut self, scope: ScopeKey) -> Self {
        self.scope = Some(scope);
        self
    }

    /// This priority (G8) instead of [`Task::PRIORITY`].
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }

    /// These attempts (G5) instead of [`Task::MAX_ATTEMPTS`].
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// This limit key (G16, G17) instead of the task's [`Task::limit_key`].
    pub fn limit_key(mut self, key: LimitKey) -> Self {
        self.limit_key = Some(key);
        self
    }

    /// This tenant (G18) instead of the task's [`Task::fairness_key`].
    pub fn fairness_key(mut self, key: FairnessKey) -> Self {
        self.fairness_key = Some(key);
        self
    }

    /// This weight (G18) instead of the task's [`Task::weight`].
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = Some(weight);
        self
    }
}

impl NewItem {
    /// The item of a task value: its JSON on [`Task::QUEUE`], with the task's
    /// defaults. Change it further with the builder methods of `NewItem`, or enqueue
    /// many in one [`EnqueueParams`](crate::EnqueueParams).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `payload` when the value does not encode as JSON,
    /// `queue` for an invalid [`Task::QUEUE`], or the field of a key the task derived
    /// and could not make; both name the type. The item's other fields are checked by
    /// the enqueue, as for every item.
    pub fn task<T: Task>(value: &T) -> Result<NewItem> {
        NewItem::task_with(value, TaskOptions::default())
    }

    /// [`NewItem::task`] with `options` over the task's defaults. A key given in
    /// `options` is used without calling the task's method for it.
    pub fn task_with<T: Task>(value: &T, options: TaskOptions) -> Result<NewItem> {
        let queue = task_queue::<T>()?;
        let payload = serde_json::to_vec(value).map_err(|e| {
            Error::invalid(
                "payload",
                format!("{} does not encode as JSON: {e}", type_name::<T>()),
            )
        })?;
        let mut item = NewItem::new(queue, payload)
            .priority(options.priority.unwrap_or(T::PRIORITY))
            .max_attempts(options.max_attempts.unwrap_or(T::MAX_ATTEMPTS));
        if let Some(schedule) = options.schedule {
            item.schedule = schedule;
        }
        if let Some(window) = options.dedup_window {
            item = item.dedup_window(window);
        }
        item.dedup_key = match options.dedup_key {
            Some(key) => Some(key),
            None => value.dedup_key()?,
        };
        item.stream = match options.stream {
            Some(stream) => Some(stream),
            None => value.stream()?,
        };
        item.scope = match options.scope {
            Some(scope) => Some(scope),
            None => value.scope()?,
        };
        item.limit_key = match options.limit_key {
            Some(key) => Some(key),
            None => value.limit_key()?,
        };
        item.fairness_key = match options.fairness_key {
            Some(key) => Some(key),
            None => value.fairness_key()?,
        };
        item.weight = options.weight.unwrap_or_else(|| value.weight());
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct SendEmail {
        to: String,
        order: u64,
    }

    impl Task for SendEmail {
        const QUEUE: &'static str = "emails";
        const PRIORITY: i16 = 3;
        const MAX_ATTEMPTS: u32 = 7;

        fn dedup_key(&self) -> Result<Option<DedupKey>> {
            Ok(Some(DedupKey::new(format!("order:{}", self.order))?))
        }

        fn scope(&self) -> Result<Option<ScopeKey>> {
            Ok(Some(ScopeKey::new(self.to.clone())?))
        }
    }

    #[derive(Serialize, Deserialize)]
    struct BadQueue;

    impl Task for BadQueue {
        const QUEUE: &'static str = "";
    }

    /// A map keyed by tuples: serde_json cannot write it.
    #[derive(Serialize, Deserialize)]
    struct Unencodable(HashMap<(u8, u8), u8>);

    impl Task for Unencodable {
        const QUEUE: &'static str = "grid";
    }

    fn mail() -> SendEmail {
        SendEmail {
            to: "ada@example.com".into(),
            order: 42,
        }
    }

    #[test]
    fn a_task_item_is_the_values_json_on_its_queue_with_the_tasks_defaults() {
        let item = NewItem::task(&mail()).unwrap();
        assert_eq!(item.queue.as_str(), "emails");
        assert_eq!(
            serde_json::from_slice::<SendEmail>(&item.payload).unwrap(),
            mail()
        );
        assert_eq!(item.payload, serde_json::to_vec(&mail()).unwrap());
        assert_eq!((item.priority, item.max_attempts), (3, 7));
        assert_eq!(item.dedup_key.unwrap().as_str(), "order:42");
        assert_eq!(item.scope.unwrap().as_str(), "ada@example.com");
        assert_eq!(item.stream, None);
        assert_eq!(item.schedule, Schedule::Now);
    }

    #[test]
    fn options_override_the_tasks_defaults_for_one_enqueue() {
        let options = TaskOptions::new()
            .delay(Duration::from_secs(60))
            .dedup_key(DedupKey::new("mine").unwrap())
            .dedup_window(Duration::from_secs(3600))
            .stream(StreamKey::new("s").unwrap())
            .scope(ScopeKey::new("other").unwrap())
            .priority(-1)
            .max_attempts(2);
        let item = NewItem::task_with(&mail(), options).unwrap();
        assert_eq!(item.schedule, Schedule::After(Duration::from_secs(60)));
        assert_eq!(item.dedup_key.unwrap().as_str(), "mine");
        assert_eq!(item.dedup_window, Duration::from_secs(3600));
        assert_eq!(item.stream.unwrap().as_str(), "s");
        assert_eq!(item.scope.unwrap().as_str(), "other");
        assert_eq!((item.priority, item.max_attempts), (-1, 2));
        let at = Timestamp::from_micros(1_700_000_000_000_000);
        let item = NewItem::task_with(&mail(), TaskOptions::new().run_at(at)).unwrap();
        assert_eq!(item.schedule, Schedule::At(at));
    }

    #[test]
    fn a_value_that_does_not_encode_is_refused_naming_the_payload_and_the_type() {
        let value = Unencodable(HashMap::from([((1, 2), 3)]));
        let e = NewItem::task(&value).unwrap_err();
        assert_eq!(e.invalid_field(), Some("payload"));
        let text = e.to_string();
        assert!(text.contains("Unencodable"), "{text}");
        assert!(text.contains("key must be a string"), "{text}");
    }

    #[test]
    fn an_invalid_queue_is_refused_naming_the_type() {
        let e = NewItem::task(&BadQueue).unwrap_err();
        assert_eq!(e.invalid_field(), Some("queue"));
        assert!(e.to_string().contains("BadQueue::QUEUE"), "{e}");
    }
}
