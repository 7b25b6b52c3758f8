//! One type per flaw: each broken store is a small wrapper of a fresh memory store,
//! written with `tenure_core::forward_store!`, that overrides only the methods its flaw
//! changes and forwards the rest.

use std::fmt;
use std::marker::PhantomData;

use super::*;

/// A broken wrapper of the memory store, opened by [`Of`].
pub(crate) trait Broken: Store + Clone + 'static {
    /// Whether the memory store underneath keeps finished items as `done`.
    const KEEP_DONE: bool = false;

    /// The flaw over `inner`, a fresh memory store on `clock`.
    fn over(inner: MemoryStore, clock: ManualClock) -> Self;

    /// The memory store underneath.
    fn inner(&self) -> &MemoryStore;

    /// Another handle onto the same data.
    fn peer(&self) -> Self {
        self.clone()
    }
}

/// State a flaw keeps across calls, shared by every handle of one store.
pub(crate) type Shared<T> = Arc<Mutex<T>>;

/// Locks a flaw's state.
pub(crate) fn lock<T>(state: &Shared<T>) -> std::sync::MutexGuard<'_, T> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Declares a flaw's type: the memory store it wraps, the clock that store reads, and
/// the state the flaw keeps (each field starts at its default), with its [`Broken`]
/// impl. A trailing `; keep_done` opens the memory store keeping finished items.
macro_rules! flaw {
    (@keep_done) => {
        false
    };
    (@keep_done keep_done) => {
        true
    };
    ($(#[$doc:meta])* $name:ident $({ $($field:ident: $ty:ty),* $(,)? })? $(; $keep:ident)?) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub(crate) struct $name {
            inner: MemoryStore,
            #[allow(dead_code)]
            clock: ManualClock,
            $($($field: $ty,)*)?
        }

        impl $crate::broken::Broken for $name {
            const KEEP_DONE: bool = flaw!(@keep_done $($keep)?);

            fn over(inner: MemoryStore, clock: ManualClock) -> Self {
                $name {
                    inner,
                    clock,
                    $($($field: Default::default(),)*)?
                }
            }

            fn inner(&self) -> &MemoryStore {
                &self.inner
            }
        }
    };
}
pub(crate) use flaw;

/// The harness of a broken store: fresh memory stores wrapped in `F`.
pub(crate) struct Of<F>(PhantomData<F>);

/// The harness of the flaw `F`.
pub(crate) fn broken<F>() -> Of<F> {
    Of(PhantomData)
}

impl<F> fmt::Debug for Of<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = std::any::type_name::<F>();
        f.write_str(name.rsplit("::").next().unwrap_or(name))
    }
}

#[async_trait]
impl<F: Broken> Harness for Of<F> {
    type Store = F;

    async fn open(&self, clock: ManualClock) -> Result<F> {
        let inner = MemoryStore::new(clock.clone()).keep_done(F::KEEP_DONE);
        Ok(F::over(inner, clock))
    }

    async fn open_peer(&self, store: &F, _clock: ManualClock) -> Result<F> {
        Ok(store.peer())
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<F>> {
        let store = self.open(clock).await?;
        store.inner().set_available(false);
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &F) -> Result<Snapshot> {
        rewind(store.inner())
    }
}

/// The `Store` impl of a flaw that hides part of each item from the memory store on
/// enqueue (its inherent `hide`) and shows it again on every read of the item (its
/// inherent `show`): in a claim's leases and in `item_get`.
macro_rules! hidden_on_enqueue {
    ($name:ident) => {
        tenure_core::forward_store! {
            impl Store for $name {
                forward self => self.inner;

                async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
                    for item in &mut params.items {
                        self.hide(item)?;
                    }
                    self.inner.enqueue(params).await
                }

                async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
                    let mut leases = self.inner.claim(params).await?;
                    for lease in &mut leases {
                        self.show(&mut lease.item);
                    }
                    Ok(leases)
                }

                async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
                    let mut item = self.inner.item_get(id).await?;
                    if let Some(item) = &mut item {
                        self.show(item);
                    }
                    Ok(item)
                }
            }
        }
    };
}
pub(crate) use hidden_on_enqueue;

/// The `Store` impl of a flaw that hands the memory store other limits than its caller
/// set (its inherent `alter`) and shows the caller's, kept in its `shown` field; then the
/// other methods the flaw writes.
macro_rules! shows_the_limits_set {
    ($name:ident { $($methods:tt)* }) => {
        tenure_core::forward_store! {
            impl Store for $name {
                forward self => self.inner;

                async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
                    params.validate(&self.limits())?;
                    let before = lock(&self.shown)
                        .insert(params.queue.clone(), params.limits.clone());
                    let mut limits = params.limits;
                    self.alter(&mut limits);
                    self.inner
                        .limits_set(LimitsParams::new(params.queue, limits))
                        .await?;
                    Ok(before)
                }

                async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
                    let shown = lock(&self.shown).get(queue).cloned();
                    match shown {
                        Some(limits) => Ok(Some(limits)),
                        None => self.inner.limits_get(queue).await,
                    }
                }

                async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
                    lock(&self.shown).remove(queue);
                    self.inner.limits_clear(queue).await
                }

                $($methods)*
            }
        }
    };
}
pub(crate) use shows_the_limits_set;
