//! The [`WorkerBuilder`]: the worker's options, their defaults, and the checks that
//! turn them into the [`Settings`] a [`Worker`] starts with (the sizing of its claims
//! is the settings' [`ClaimSizes`]).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    Error, LeaderName, OwnerId, Partitioning, QueueName, Result, RetryPolicy, SharedClock, Store,
    SystemClock, Task, DEFAULT_LEADER_NAME, DEFAULT_STALE_AFTER,
};

use crate::handler::Handler;
use crate::periodic::{Periodic, Periodics};
use crate::poll::PollPolicy;
use crate::settings::{ClaimSizes, Settings};
use crate::task::{combine, Registered, RunTask, Runs, Served, TaskHandler};
use crate::worker::Worker;

/// Default handler slots per worker.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Default lease length.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// What [`WorkerBuilder::check`] hands to [`Worker::start`].
type Checked = (Arc<dyn Store>, Arc<dyn Handler>, Settings);

/// Builds a [`Worker`]: the store, the queues it serves, its concurrency, lease length,
/// poll policy and handler. Start it with [`WorkerBuilder::spawn`].
///
/// ```no_run
/// # async fn demo(store: std::sync::Arc<dyn tenure_core::Store>) -> tenure_core::Result<()> {
/// use std::time::Duration;
/// use tenure_runtime::{Job, JobError, Worker};
/// use tenure_core::QueueName;
///
/// let worker = Worker::builder(store)
///     .queue(QueueName::new("emails")?)
///     .concurrency(4)
///     .lease_duration(Duration::from_secs(30))
///     .handler(|job: Job| async move {
///         println!("sending {:?}", job.payload());
///         Ok::<(), JobError>(())
///     })
///     .spawn()?;
/// // ... later:
/// let report = worker.shutdown(Duration::from_secs(10)).await;
/// println!("released {} unfinished leases", report.released);
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until spawned"]
pub struct WorkerBuilder {
    store: Arc<dyn Store>,
    handler: Option<Arc<dyn Handler>>,
    queues: Vec<QueueName>,
    /// Typed tasks ([`WorkerBuilder::task`]), each serving its own queue.
    tasks: Vec<Registered>,
    instance: Option<OwnerId>,
    concurrency: usize,
    claim_batch: Option<usize>,
    claims_in_flight: Option<usize>,
    prefetch: Option<usize>,
    partitioning: Option<Partitioning>,
    handler_timeout: Option<Duration>,
    lease: Duration,
    poll: PollPolicy,
    retry: RetryPolicy,
    renew_timeout: Option<Duration>,
    finalize_batch: usize,
    finalize_window: Duration,
    heartbeat_interval: Duration,
    stale_after: Duration,
    heartbeat_enabled: bool,
    maintenance: bool,
    maintenance_interval: Duration,
    leader_name: Option<LeaderName>,
    keep_done_for: Duration,
    stream_run: u32,
    periodic: Vec<Periodic>,
    clock: Option<SharedClock>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("store", &self.store.name())
            .field("queues", &self.queues)
            .field("concurrency", &self.concurrency)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Starts building a worker on `store`: any [`Store`], including an
    /// `Arc<dyn Store>` chosen at run time.
    pub fn builder(store: impl Store) -> WorkerBuilder {
        WorkerBuilder::new(Arc::new(store))
    }
}

impl WorkerBuilder {
    fn new(store: Arc<dyn Store>) -> Self {
        WorkerBuilder {
            store,
            handler: None,
            queues: Vec::new(),
            tasks: Vec::new(),
            instance: None,
            concurrency: DEFAULT_CONCURRENCY,
            claim_batch: None,
            claims_in_flight: None,
            prefetch: None,
            partitioning: None,
            handler_timeout: None,
            lease: DEFAULT_LEASE,
            poll: PollPolicy::default(),
            retry: RetryPolicy::default(),
            renew_timeout: None,
            finalize_batch: 128,
            finalize_window: Duration::from_millis(10),
            heartbeat_interval: Duration::from_secs(10),
            stale_after: DEFAULT_STALE_AFTER,
            heartbeat_enabled: true,
            maintenance: true,
            maintenance_interval: Duration::from_secs(5),
            leader_name: None,
            keep_done_for: Duration::from_secs(24 * 60 * 60),
            stream_run: 1,
            periodic: Vec::new(),
            clock: None,
        }
    }

    /// Serves `queue` (call again to serve several).
    pub fn queue(mut self, queue: QueueName) -> Self {
        self.queues.push(queue);
        self
    }

    /// Serves these queues (added to any named before).
    pub fn queues(mut self, queues: impl IntoIterator<Item = QueueName>) -> Self {
        self.queues.extend(queues);
        self
    }

    /// The handler run for every claimed item: an async closure
    /// (`|job: Job| async move { .. }`) or any [`Handler`]. Beside typed tasks
    /// ([`task`](Self::task)) it serves only the queues named with
    /// [`queue`](Self::queue).
    pub fn handler(mut self, handler: impl Handler) -> Self {
        self.handler = Some(Arc::new(handler));
        self
    }

    /// A shared handler trait object.
    pub fn handler_arc(mut self, handler: Arc<dyn Handler>) -> Self {
        self.handler = Some(handler);
        self
    }

    /// This worker's instance id, which owns its leases (G12). Default: a fresh
    /// `worker-<uuid>`.
    pub fn instance_id(mut self, id: OwnerId) -> Self {
        self.instance = Some(id);
        self
    }

    /// Most handlers running at once (default 8). The worker claims for its free slots,
    /// plus the [`prefetch`](Self::prefetch) while its handlers are short.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Most items asked for in one claim (default: the concurrency, capped by the
    /// store's batch limit).
    pub fn claim_batch(mut self, n: usize) -> Self {
        self.claim_batch = Some(n);
        self
    }

    /// How many claim calls a worker keeps out at once while its queues have work
    /// (default 2, and 4 from [`WIDE_FROM`](crate::WIDE_FROM) slots up; at most 16).
    /// Slots that free while one claim is out are claimed by the next, so the round
    /// trips overlap; an idle queue still sees one poll at a time. Each claim holds a connection of the
    /// store's pool while it runs.
    pub fn claims_in_flight(mut self, n: usize) -> Self {
        self.claims_in_flight = Some(n);
        self
    }

    /// How many leases a worker may hold beyond its slots while its handlers are short
    /// (default: the claim batch, so the next claim's leases arrive while the slots
    /// are busy, and from [`WIDE_FROM`](crate::WIDE_FROM) slots up three claim
    /// batches, at most 256 leases; 0 turns prefetch off; at most 10 times the
    /// concurrency).
    ///
    /// # Behavior
    ///
    /// - Applies only as far as a queued lease would wait well under a renewal
    ///   interval for its slot: the moving average of handler run times, times
    ///   `prefetch / concurrency`, must stay within a quarter of the renewal interval
    ///   (a twelfth of the lease), so the worker holds at most `concurrency` times that
    ///   quarter over the average beyond its slots. Slow handlers, or none returned
    ///   yet, turn it off and the worker claims only for free slots.
    /// - A prefetched lease is leased in the store like a running one, so stream order
    ///   (G9) and scope exclusivity (G10) hold exactly as for running items; it waits
    ///   in claim order for a slot.
    /// - One still waiting when its renewal comes due is given back (released), never
    ///   renewed, so the worker holds no lease it did not start within a third of a
    ///   lease; shutdown gives back every one at once.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// Claims only this instance's share of the work (G14; see
    /// [`partition`](tenure_core::partition)): every worker serving the queues must use the
    /// same [`Partitioning`] and its own [`instance_id`](Self::instance_id). Needs a
    /// store that declares
    /// [`Capabilities::partitioned_claiming`](tenure_core::Capabilities::partitioned_claiming);
    /// [`spawn`](Self::spawn) refuses others. Default: off.
    pub fn partitioned(mut self, partitioning: Partitioning) -> Self {
        self.partitioning = Some(partitioning);
        self
    }

    /// Claims runs of up to `k` consecutive items of one stream at once (G9; see
    /// [`ClaimParams::stream_runs`](tenure_core::ClaimParams::stream_runs)), so a hot stream
    /// costs one claim per run instead of one per item. A run is handled on one slot,
    /// one item after another in stream order; when an item does not complete (a
    /// failure, a panic, a timeout, a lost lease, a stop), the rest of its run is not
    /// started: the store puts those items back untouched. The worker may hold up to
    /// `k - 1` leases more than its slots and prefetch, so one run fits whatever the
    /// concurrency. 1..=[`MAX_STREAM_RUN`](tenure_core::MAX_STREAM_RUN); default 1 (off). A
    /// store without [`Capabilities::stream_runs`](tenure_core::Capabilities::stream_runs)
    /// claims heads only.
    pub fn stream_runs(mut self, k: u32) -> Self {
        self.stream_run = k;
        self
    }

    /// Stops a handler still running `timeout` after it started: its cancellation
    /// token fires ([`StopReason::Timeout`](crate::StopReason::Timeout)), a handler
    /// that ignores it is dropped half a lease later, and the attempt is recorded as a
    /// retryable failure (G5), so the item's `max_attempts` bounds how often it can
    /// time out. Renewal keeps the lease meanwhile. Default: none, the lease and
    /// renewal cap (G4) bound an attempt instead.
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = Some(timeout);
        self
    }

    /// How long each lease lasts unless renewed (default 30 s). Renewal happens a third
    /// of a lease after the last successful one; the self-stop fires half a lease after
    /// it. An item's `max_renewals` (G4, default 6) therefore bounds one attempt to
    /// about `max_renewals * lease / 3 + lease / 2` (75 s with the defaults); give
    /// long handlers a longer lease or more renewals.
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The claim loop's adaptive poll (default 250 ms doubling to 10 s).
    pub fn poll(mut self, poll: PollPolicy) -> Self {
        self.poll = poll;
        self
    }

    /// The delay of retryable failures (default [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long one renewal call may take before it is abandoned and retried (default a
    /// twelfth of the lease). Must be under a sixth of the lease so a retry fits before
    /// the self-stop.
    pub fn renew_timeout(mut self, timeout: Duration) -> Self {
        self.renew_timeout = Some(timeout);
        self
    }

    /// Finalize coalescing: a flush happens once `max_tokens` outcomes wait or `window`
    /// has passed since the first of them (default 128 and 10 ms). Each flush makes at
    /// most one `complete` and one `fail` call.
    pub fn finalize_batch(mut self, max_tokens: usize, window: Duration) -> Self {
        self.finalize_batch = max_tokens;
        self.finalize_window = window;
        self
    }

    /// How often the instance heartbeats (default 10 s) and after how much silence peers
    /// evict an instance (default 30 s). The silence must be at least twice the
    /// interval.
    pub fn heartbeat(mut self, interval: Duration, stale_after: Duration) -> Self {
        self.heartbeat_interval = interval;
        self.stale_after = stale_after;
        self
    }

    /// Whether the instance heartbeat starts on (default true). A worker started with it
    /// off never registers, so peers see no instance of it (and could not evict one);
    /// it claims at once instead of waiting for its registration. Turn it on or off
    /// while running with [`Worker::set_heartbeat`], the off-switch for a graceful
    /// drain. A [`partitioned`](Self::partitioned) worker needs it on
    /// ([`spawn`](Self::spawn) refuses otherwise): its claims need a registered owner.
    pub fn heartbeat_enabled(mut self, enabled: bool) -> Self {
        self.heartbeat_enabled = enabled;
        self
    }

    /// Whether this worker takes part in maintenance (default true): every `interval`
    /// (default 5 s) it tries the leader lease, and as leader recovers expired leases,
    /// purges finished items and old dedup keys, and evicts stale instances.
    pub fn maintenance(mut self, enabled: bool) -> Self {
        self.maintenance = enabled;
        self
    }

    /// How often maintenance runs (default 5 s). The leader lease lasts three intervals.
    pub fn maintenance_interval(mut self, interval: Duration) -> Self {
        self.maintenance_interval = interval;
        self
    }

    /// The leader lease's name (default `tenure.maintenance`): workers that share it
    /// elect one maintainer.
    pub fn leader_name(mut self, name: LeaderName) -> Self {
        self.leader_name = Some(name);
        self
    }

    /// How long finished items are kept before the purge deletes them (default 24 h).
    pub fn keep_done_for(mut self, keep: Duration) -> Self {
        self.keep_done_for = keep;
        self
    }

    /// Adds a periodic job (call again for several): while this worker holds the
    /// maintenance leader lease it enqueues one item per tick, exactly once across all
    /// instances (see [`Periodic`] for the rules). Every worker of a deployment may declare the
    /// same jobs; only the leader enqueues. Needs maintenance on.
    pub fn periodic(mut self, job: Periodic) -> Self {
        self.periodic.push(job);
        self
    }

    /// The wall clock periodic schedules are read on (default the system clock). Give
    /// it the store's clock where that is not the system's (tests on a manual clock).
    pub fn clock(mut self, clock: impl tenure_core::Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Checks the settings and starts the worker on the current tokio runtime.
    ///
    /// Errors name the offending setting (`Error::InvalidInput`): no queue, no handler,
    /// two tasks on one queue (see [`task_with`](Self::task_with)), a concurrency of 0,
    /// a lease outside the store's limits, and so on.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub fn spawn(self) -> Result<Worker> {
        let (store, handler, settings) = self.check()?;
        Ok(Worker::start(store, handler, settings))
    }

    fn check(mut self) -> Result<Checked> {
        let limits = self.store.limits();
        let served = combine(
            std::mem::take(&mut self.tasks),
            Served {
                handler: self.handler.take(),
                queues: std::mem::take(&mut self.queues),
                lease: self.lease,
            },
        )?;
        (self.queues, self.lease) = (served.queues, served.lease);
        let handler = served
            .handler
            .ok_or_else(|| Error::invalid("handler", "a worker needs a handler or a task"))?;
        if self.queues.is_empty() {
            return Err(Error::invalid("queues", "must name at least one queue"));
        }
        if self.queues.len() > limits.max_claim_queues {
            return Err(Error::invalid(
                "queues",
                format!(
                    "names {} queues; one claim takes at most {}",
                    self.queues.len(),
                    limits.max_claim_queues
                ),
            ));
        }
        if self.concurrency == 0 || self.concurrency > 100_000 {
            return Err(Error::invalid(
                "concurrency",
                format!("{} is outside 1..=100000", self.concurrency),
            ));
        }
        let ClaimSizes {
            claim_batch,
            claims_in_flight,
            prefetch,
        } = ClaimSizes::check(
            self.concurrency,
            [self.claim_batch, self.claims_in_flight, self.prefetch],
            limits.max_batch,
        )?;
        if let Some(p) = &self.partitioning {
            p.validate()?;
            if !self.heartbeat_enabled {
                return Err(Error::invalid(
                    "heartbeat_enabled",
                    "a partitioned worker claims only as a registered instance: its heartbeat must start on",
                ));
            }
            if !self.store.capabilities().partitioned_claiming {
                return Err(Error::unsupported(
                    "partitioned claiming",
                    self.store.name(),
                ));
            }
        }
        if self.lease < limits.min_lease || self.lease > limits.max_lease {
            return Err(Error::invalid(
                "lease_duration",
                format!(
                    "{:?} is outside {:?}..={:?}",
                    self.lease, limits.min_lease, limits.max_lease
                ),
            ));
        }
        if self.handler_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid("handler_timeout", "must be above 0"));
        }
        if self.poll.base.is_zero() {
            return Err(Error::invalid("poll", "the base interval must be above 0"));
        }
        let renew_timeout = self.renew_timeout.unwrap_or(self.lease / 12);
        if renew_timeout.is_zero() || renew_timeout >= self.lease / 6 {
            return Err(Error::invalid(
                "renew_timeout",
                format!(
                    "{renew_timeout:?} must be above 0 and under a sixth of the lease ({:?})",
                    self.lease / 6
                ),
            ));
        }
        if self.finalize_batch == 0 || self.finalize_batch > limits.max_batch {
            return Err(Error::invalid(
                "finalize_batch",
                format!(
                    "{} is outside 1..={}",
                    self.finalize_batch, limits.max_batch
                ),
            ));
        }
        if self.heartbeat_interval.is_zero() || self.stale_after < self.heartbeat_interval * 2 {
            return Err(Error::invalid(
                "heartbeat",
                format!(
                    "stale_after {:?} must be at least twice the interval {:?}",
                    self.stale_after, self.heartbeat_interval
                ),
            ));
        }
        tenure_core::EvictParams::new(self.stale_after).validate(&limits)?;
        let leader_lease = self.maintenance_interval * 3;
        if self.maintenance
            && (self.maintenance_interval.is_zero()
                || leader_lease < limits.min_lease
                || leader_lease > limits.max_lease)
        {
            return Err(Error::invalid(
                "maintenance_interval",
                format!(
                    "{:?} gives a leader lease of {leader_lease:?}, outside {:?}..={:?}",
                    self.maintenance_interval, limits.min_lease, limits.max_lease
                ),
            ));
        }
        if self.stream_run == 0 || self.stream_run > tenure_core::MAX_STREAM_RUN {
            return Err(Error::invalid(
                "stream_runs",
                format!(
                    "{} is outside 1..={}",
                    self.stream_run,
                    tenure_core::MAX_STREAM_RUN
                ),
            ));
        }
        if !self.periodic.is_empty() && !self.maintenance {
            return Err(Error::invalid(
                "periodic",
                "periodic jobs are enqueued by the maintenance leader; turn maintenance on",
            ));
        }
        let periodics = Arc::new(Periodics::new(self.periodic)?);
        let instance = match self.instance {
            Some(id) => id,
            None => OwnerId::generate("worker")?,
        };
        let leader_name = match self.leader_name {
            Some(n) => n,
            None => LeaderName::new(DEFAULT_LEADER_NAME)?,
        };
        let settings = Settings {
            queues: self.queues,
            instance,
            concurrency: self.concurrency,
            claim_batch,
            claims_in_flight,
            prefetch,
            partitioning: self.partitioning,
            lease: self.lease,
            poll: self.poll,
            retry: self.retry,
            renew_after: self.lease / 3,
            renew_coalesce: self.lease / 12,
            renew_timeout,
            self_stop_after: self.lease / 2,
            abort_after: self.lease / 2,
            handler_timeout: self.handler_timeout,
            finalize_batch: self.finalize_batch,
            finalize_window: self.finalize_window,
            heartbeat_interval: self.heartbeat_interval,
            stale_after: self.stale_after,
            heartbeat_enabled: self.heartbeat_enabled,
            maintenance: self.maintenance,
            maintenance_interval: self.maintenance_interval,
            leader_name,
            leader_lease,
            keep_done_for: self.keep_done_for,
            limits,
            stream_run: self.stream_run,
            periodics,
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
        };
        Ok((self.store, handler, settings))
    }
}

impl WorkerBuilder {
    /// Runs task type `T` ([`RunTask`]) on its queue, [`Task::QUEUE`] (call again for
    /// more types). The worker claims the queues of all its tasks, and of its closure
    /// [`handler`](Self::handler), in one claim, and hands each item to its queue's
    /// handler, decoded as its type. See [`WorkerBuilder::task_with`] for the rules.
    pub fn task<T: RunTask>(self) -> Self {
        self.task_with::<T, _>(Runs::<T>(PhantomData))
    }

    /// Runs task type `T` with `handler`, a closure of the decoded value and its job
    /// (`|mail: SendEmail, job: Job| async move { .. }`), or any [`TaskHandler`]: for
    /// a handler that keeps state, such as a pool or a client.
    ///
    /// # Behavior
    ///
    /// - A task owns its queue: one task type per queue. [`spawn`](Self::spawn)
    ///   refuses two registrations with one queue (the same type twice included),
    ///   and a queue named with [`queue`](Self::queue) that a task owns, naming the
    ///   types (`Error::InvalidInput`, field `task` or `queues`).
    /// - The closure [`handler`](Self::handler) serves the queues named with
    ///   [`queue`](Self::queue), beside the tasks; `spawn` refuses a handler without
    ///   queues, and queues without a handler.
    /// - A payload that does not decode as `T` is a permanent failure: the item goes
    ///   dead (G5) with a `last_error` naming the type and the serde error.
    /// - The worker's lease is the longest of its
    ///   [`lease_duration`](Self::lease_duration) and its tasks' [`Task::LEASE`]; a
    ///   retryable failure the handler returns without a delay waits the task's
    ///   [`retry_policy`](Task::retry_policy) if it has one. Everything else
    ///   (concurrency, renewal, self-stop, timeouts, stream runs) is the worker's.
    pub fn task_with<T: Task, H: TaskHandler<T>>(mut self, handler: H) -> Self {
        self.tasks.push(Registered::new::<T, H>(handler));
        self
    }
}
