//! Typed tasks in the worker: [`RunTask`], [`TaskHandler`], and the router that hands
//! each claimed item to the handler of its queue's task.
//!
//! A worker registers task types with [`WorkerBuilder::task`] (the type runs itself,
//! [`RunTask`]) or [`WorkerBuilder::task_with`] (a handler that keeps state, such as a
//! connection pool). Each task owns its [`Task::QUEUE`]; the worker claims its tasks'
//! queues, and those named with [`WorkerBuilder::queue`] for its closure
//! [`handler`](crate::WorkerBuilder::handler), in one claim, and hands each item to the
//! handler of its queue. Under the router every attempt is an ordinary [`Handler`]
//! call, so renewal, the self-stop, fenced finalize, stream runs and
//! [`Job::take_finalize`] work for tasks exactly as for the closure handler.
//!
//! [`WorkerBuilder::task`]: crate::WorkerBuilder::task
//! [`WorkerBuilder::task_with`]: crate::WorkerBuilder::task_with
//! [`WorkerBuilder::queue`]: crate::WorkerBuilder::queue

use std::any::type_name;
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{task_queue, Error, QueueName, Result, RetryPolicy, Task};

use crate::handler::{Handler, Job, JobError};

/// A handler's boxed future, as [`Handler::handle`] returns it.
type BoxFuture<'a> = Pin<Box<dyn Future<Output = std::result::Result<(), JobError>> + Send + 'a>>;

/// How a [`Task`] runs in a worker that registers it with [`WorkerBuilder::task`].
///
/// `run` gets the decoded value and the attempt's [`Job`]: its cancellation
/// ([`Job::cancelled`], [`Job::is_cancelled`]), its token, and
/// [`Job::take_finalize`] to complete the item inside the handler's own database
/// transaction. Its answer is the attempt's outcome, as for any [`Handler`]: `Ok(())`
/// completes the item, a [`JobError`] retries it (after the task's
/// [`retry_policy`](Task::retry_policy), or the worker's) or makes it dead, and a
/// panic is a retryable failure.
///
/// Write it as an `async fn`. A handler that needs state it does not carry (a pool, a
/// client) is a closure instead: [`WorkerBuilder::task_with`].
///
/// ```no_run
/// use serde::{Deserialize, Serialize};
/// use tenure_runtime::{Job, JobError, RunTask, Worker};
/// use tenure_core::{StoreExt, Task};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail {
///     to: String,
/// }
///
/// impl Task for SendEmail {
///     const QUEUE: &'static str = "emails";
/// }
///
/// impl RunTask for SendEmail {
///     async fn run(self, job: Job) -> Result<(), JobError> {
///         println!("sending to {}, attempt {}", self.to, job.attempt());
///         Ok(())
///     }
/// }
///
/// #[derive(Serialize, Deserialize)]
/// struct Resize {
///     image: String,
///     width: u32,
/// }
///
/// impl Task for Resize {
///     const QUEUE: &'static str = "thumbnails";
/// }
///
/// # async fn demo(store: std::sync::Arc<dyn tenure_core::Store>) -> Result<(), Box<dyn std::error::Error>> {
/// store.enqueue_task(&SendEmail { to: "ada@example.com".into() }).await?;
/// store.enqueue_task(&Resize { image: "cat.png".into(), width: 200 }).await?;
///
/// let sizes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// let seen = sizes.clone();
/// let worker = Worker::builder(store)
///     .task::<SendEmail>()
///     // A handler that keeps state: a closure of the task's value and its job.
///     .task_with(move |resize: Resize, _job: Job| {
///         let seen = seen.clone();
///         async move {
///             seen.lock().map_err(|_| JobError::retry("poisoned"))?.push(resize.width);
///             Ok(())
///         }
///     })
///     .spawn()?;
/// # Ok(())
/// # }
/// ```
///
/// `run` takes the task's own value and no other: this does not compile.
///
/// ```compile_fail,E0053
/// # use serde::{Deserialize, Serialize};
/// # use tenure_runtime::{Job, JobError, RunTask};
/// # use tenure_core::Task;
/// # #[derive(Serialize, Deserialize)]
/// # struct SendEmail { to: String }
/// # impl Task for SendEmail { const QUEUE: &'static str = "emails"; }
/// # #[derive(Serialize, Deserialize)]
/// # struct Resize { width: u32 }
/// impl RunTask for SendEmail {
///     async fn run(self: Resize, _job: Job) -> Result<(), JobError> {
///         Ok(())
///     }
/// }
/// ```
///
/// [`WorkerBuilder::task`]: crate::WorkerBuilder::task
/// [`WorkerBuilder::task_with`]: crate::WorkerBuilder::task_with
pub trait RunTask: Task {
    /// Runs one attempt of this value.
    fn run(self, job: Job) -> impl Future<Output = std::result::Result<(), JobError>> + Send;
}

/// The handler of task type `T` in a worker ([`WorkerBuilder::task_with`]): called
/// with each claimed item's value, decoded as `T`, and its [`Job`].
///
/// Implemented for every `Fn(T, Job) -> impl Future<Output = Result<(), JobError>>`,
/// so a closure that clones its state into an `async move` block works. Its first
/// argument is the task's own type: a handler of another task's type does not
/// compile for `T`, so registering a handler of `Resize` for `SendEmail` is refused by
/// the compiler.
///
/// ```compile_fail,E0631
/// # use serde::{Deserialize, Serialize};
/// # use tenure_runtime::{Job, JobError, Worker};
/// # use tenure_core::Task;
/// # #[derive(Serialize, Deserialize)]
/// # struct SendEmail { to: String }
/// # impl Task for SendEmail { const QUEUE: &'static str = "emails"; }
/// # #[derive(Serialize, Deserialize)]
/// # struct Resize { width: u32 }
/// # impl Task for Resize { const QUEUE: &'static str = "thumbnails"; }
/// # fn demo(store: std::sync::Arc<dyn tenure_core::Store>) {
/// let builder = Worker::builder(store)
///     .task_with::<SendEmail, _>(|resize: Resize, _job: Job| async move {
///         Ok::<(), JobError>(())
///     });
/// # }
/// ```
///
/// [`WorkerBuilder::task_with`]: crate::WorkerBuilder::task_with
pub trait TaskHandler<T: Task>: Send + Sync + 'static {
    /// Runs one attempt of `task`.
    fn handle(&self, task: T, job: Job) -> BoxFuture<'static>;
}

impl<T, F, Fut> TaskHandler<T> for F
where
    T: Task,
    F: Fn(T, Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), JobError>> + Send + 'static,
{
    fn handle(&self, task: T, job: Job) -> BoxFuture<'static> {
        Box::pin((self)(task, job))
    }
}

/// The handler of a [`RunTask`] type: its own `run`.
pub(crate) struct Runs<T>(pub(crate) PhantomData<fn(T)>);

impl<T: RunTask> TaskHandler<T> for Runs<T> {
    fn handle(&self, task: T, job: Job) -> BoxFuture<'static> {
        Box::pin(task.run(job))
    }
}

/// One task type's handler behind the [`Handler`] interface: decodes the payload as
/// `T` and calls the task's handler with it.
struct Typed<T, H> {
    handler: H,
    retry: Option<RetryPolicy>,
    _task: PhantomData<fn(T)>,
}

impl<T: Task, H: TaskHandler<T>> Handler for Typed<T, H> {
    fn handle<'life0, 'async_trait>(&'life0 self, job: Job) -> BoxFuture<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let task = match serde_json::from_slice::<T>(job.payload()) {
            Ok(task) => task,
            Err(e) => {
                let message = format!("the payload does not decode as {}: {e}", type_name::<T>());
                return Box::pin(std::future::ready(Err(JobError::permanent(message))));
            }
        };
        match self.retry {
            None => self.handler.handle(task, job),
            Some(policy) => {
                let token = job.token();
                let fut = self.handler.handle(task, job);
                Box::pin(async move {
                    fut.await.map_err(|e| match e.retry_delay() {
                        None if !e.is_permanent() => {
                            JobError::retry_after(e.message().to_owned(), policy.delay(&token))
                        }
                        _ => e,
                    })
                })
            }
        }
    }
}

/// A task type registered with a worker builder, not yet checked.
pub(crate) struct Registered {
    /// The task's type name, for errors.
    name: &'static str,
    queue: Result<QueueName>,
    lease: Option<Duration>,
    handler: Arc<dyn Handler>,
}

impl Registered {
    pub(crate) fn new<T: Task, H: TaskHandler<T>>(handler: H) -> Self {
        Registered {
            name: type_name::<T>(),
            queue: task_queue::<T>(),
            lease: T::LEASE,
            handler: Arc::new(Typed {
                handler,
                retry: T::retry_policy(),
                _task: PhantomData::<fn(T)>,
            }),
        }
    }
}

/// Hands each job to the handler of its queue: a task's, or the closure handler.
struct Router {
    routes: HashMap<QueueName, Arc<dyn Handler>, foldhash::fast::RandomState>,
    /// The closure handler, for the queues named with `.queue`.
    fallback: Option<Arc<dyn Handler>>,
}

impl Handler for Router {
    fn handle<'life0, 'async_trait>(&'life0 self, job: Job) -> BoxFuture<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        match self
            .routes
            .get(&job.item().queue)
            .or(self.fallback.as_ref())
        {
            Some(handler) => handler.handle(job),
            // The worker claims only the queues it has handlers for.
            None => {
                let message = format!("no handler serves queue {}", job.item().queue);
                Box::pin(std::future::ready(Err(JobError::retry(message))))
            }
        }
    }
}

/// What a worker serves: its handler, its queues and its lease.
pub(crate) struct Served {
    pub(crate) handler: Option<Arc<dyn Handler>>,
    pub(crate) queues: Vec<QueueName>,
    pub(crate) lease: Duration,
}

/// What a worker with `tasks` serves, beside its closure handler serving the queues
/// named with `.queue` and the lease asked for (`asked`); refuses an ambiguous
/// combination. Without tasks, `asked` as it is (checked by the caller).
pub(crate) fn combine(tasks: Vec<Registered>, asked: Served) -> Result<Served> {
    let Served {
        handler,
        queues,
        lease,
    } = asked;
    if tasks.is_empty() {
        return Ok(Served {
            handler,
            queues,
            lease,
        });
    }
    match (&handler, queues.is_empty()) {
        (Some(_), true) => {
            return Err(Error::invalid(
                "queues",
                "the closure handler serves no queue (tasks serve their own): name its queues \
                 with .queue, or leave it out",
            ))
        }
        (None, false) => {
            return Err(Error::invalid(
                "handler",
                format!(
                    "queues {} have no handler: a task serves its own queue, and the queues \
                     named with .queue need a closure handler",
                    names(&queues)
                ),
            ))
        }
        _ => {}
    }
    let mut owners: HashMap<QueueName, &'static str, foldhash::fast::RandomState> =
        HashMap::default();
    let mut routes = HashMap::default();
    let mut all = Vec::with_capacity(tasks.len() + queues.len());
    let mut lease = lease;
    for task in tasks {
        let queue = task.queue.map_err(|e| match e {
            Error::InvalidInput { reason, .. } => Error::invalid("task", reason),
            other => other,
        })?;
        if let Some(first) = owners.insert(queue.clone(), task.name) {
            return Err(Error::invalid(
                "task",
                if first == task.name {
                    format!("{first} is registered twice")
                } else {
                    format!(
                        "{first} and {} both declare queue {queue}; a queue is served by one \
                         task type",
                        task.name
                    )
                },
            ));
        }
        lease = lease.max(task.lease.unwrap_or_default());
        routes.insert(queue.clone(), task.handler);
        all.push(queue);
    }
    for queue in &queues {
        if let Some(owner) = owners.get(queue) {
            return Err(Error::invalid(
                "queues",
                format!(
                    "{queue} is the queue of task {owner}, which serves it; name with .queue \
                     only the queues of the closure handler"
                ),
            ));
        }
    }
    all.extend(queues);
    let router: Arc<dyn Handler> = Arc::new(Router {
        routes,
        fallback: handler,
    });
    Ok(Served {
        handler: Some(router),
        queues: all,
        lease,
    })
}

fn names(queues: &[QueueName]) -> String {
    queues
        .iter()
        .map(QueueName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
