//! Cases, their results and the report of a run.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{Capabilities, ManualClock, Store, Timestamp};

use crate::certificate::{certify, Certificate, StoreInfo};
use crate::harness::{Harness, Snapshot, Unreachable};

/// What one case concluded when it did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every expectation held.
    Passed,
    /// The case could not be exercised against this harness (for example the harness
    /// has no store that can be made unreachable). Not a pass: the report says so.
    DidNotApply {
        /// Why it did not apply.
        reason: String,
    },
}

/// What a case returns: a [`Verdict`], or the first expectation that did not hold.
pub type CaseResult = Result<Verdict, Failure>;

/// The future a case runs as.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseResult> + Send + 'a>>;

/// A case's body: given a fresh [`Env`], checks one behaviour.
pub type CaseFn<H> = for<'a> fn(Env<'a, H>) -> CaseFuture<'a>;

/// An optional feature a store may declare in [`Store::capabilities`]. Cases gated by
/// one are skipped, with the reason in the report, when the store does not declare it.
/// Mandatory guarantees have no capability and cannot be skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// G14 partitioned claiming ([`Capabilities::partitioned_claiming`]).
    PartitionedClaiming,
    /// Wake-ups from other processes ([`Capabilities::cross_process_wakeups`]).
    CrossProcessWakeups,
    /// Stream runs ([`Capabilities::stream_runs`]).
    StreamRuns,
    /// Queue limits, G16 and G17 ([`Capabilities::limits`]).
    Limits,
    /// Fair shares, G18 ([`Capabilities::fair_shares`]).
    FairShares,
}

impl Capability {
    /// The capability's name as the report prints it.
    pub fn name(self) -> &'static str {
        match self {
            Capability::PartitionedClaiming => "partitioned_claiming",
            Capability::CrossProcessWakeups => "cross_process_wakeups",
            Capability::StreamRuns => "stream_runs",
            Capability::Limits => "limits",
            Capability::FairShares => "fair_shares",
        }
    }

    /// True when `caps` declares this capability.
    pub fn declared_by(self, caps: &Capabilities) -> bool {
        match self {
            Capability::PartitionedClaiming => caps.partitioned_claiming,
            Capability::CrossProcessWakeups => caps.cross_process_wakeups,
            Capability::StreamRuns => caps.stream_runs,
            Capability::Limits => caps.limits,
            Capability::FairShares => caps.fair_shares,
        }
    }
}

/// One named behaviour of one guarantee group.
pub struct Case<H: Harness> {
    /// The group, named after its guarantee (`"g03_fenced_finalize"`).
    pub group: &'static str,
    /// The behaviour, as a sentence in snake case.
    pub name: &'static str,
    /// The optional feature this case needs, or `None` for a mandatory case.
    pub capability: Option<Capability>,
    /// The body.
    pub run: CaseFn<H>,
}

impl<H: Harness> Case<H> {
    /// A case of `group` named `name`.
    pub fn new(
        group: &'static str,
        name: &'static str,
        capability: Option<Capability>,
        run: CaseFn<H>,
    ) -> Self {
        Case {
            group,
            name,
            capability,
            run,
        }
    }

    /// `group::name`, the test name a runner shows and filters on.
    pub fn full_name(&self) -> String {
        format!("{}::{}", self.group, self.name)
    }
}

impl<H: Harness> Clone for Case<H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: Harness> Copy for Case<H> {}

impl<H: Harness> fmt::Debug for Case<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("group", &self.group)
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish_non_exhaustive()
    }
}

/// An expectation that did not hold: which case, what it expected, what it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure {
    /// The group of the failed case (filled in by the runner).
    pub group: &'static str,
    /// The failed case (filled in by the runner).
    pub case: &'static str,
    /// What the guarantee requires.
    pub expectation: String,
    /// What the store did instead.
    pub observed: String,
}

impl Failure {
    /// A failure of the case being run; the runner fills in its group and name.
    /// Long texts (a whole item with a large payload) are cut to a readable length.
    pub fn new(expectation: impl Into<String>, observed: impl Into<String>) -> Self {
        Failure {
            group: "",
            case: "",
            expectation: shorten(expectation.into()),
            observed: shorten(observed.into()),
        }
    }

    /// Names the case this failure belongs to.
    pub fn located(mut self, group: &'static str, case: &'static str) -> Self {
        self.group = group;
        self.case = case;
        self
    }
}

/// The longest expectation or observation a failure keeps, in bytes.
const MAX_FAILURE_TEXT: usize = 1_500;

fn shorten(mut text: String) -> String {
    if text.len() > MAX_FAILURE_TEXT {
        let mut cut = MAX_FAILURE_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("... ({dropped} more bytes)"));
    }
    text
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}::{}: ", self.group, self.case)?;
        }
        write!(
            f,
            "expected {}; observed {}",
            self.expectation, self.observed
        )
    }
}

impl std::error::Error for Failure {}

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every expectation held.
    Passed,
    /// An expectation did not hold.
    Failed(Failure),
    /// Not run: the store does not declare the optional capability the case needs.
    Skipped {
        /// Which capability was missing.
        reason: String,
    },
    /// Run, but it could not exercise this harness (see [`Verdict::DidNotApply`]).
    DidNotApply {
        /// Why it did not apply.
        reason: String,
    },
}

/// The result of one case in a [`Report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The case's group.
    pub group: &'static str,
    /// The case's name.
    pub case: &'static str,
    /// How it ended.
    pub status: Status,
}

/// Every case of one run and how it ended; failures are collected, never cut short.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One entry per case, in registry order.
    pub entries: Vec<Entry>,
    /// The store the cases ran against, once one was opened.
    pub store: Option<StoreInfo>,
}

impl Report {
    /// What this run certifies, counting every case of the registry: a group is
    /// certified when all its cases ran and passed, and every other group gets one line
    /// saying why not (failed, skipped for a capability, did not apply, not run).
    pub fn certificate(&self) -> Certificate {
        let mut registry: Vec<(&'static str, usize)> = Vec::new();
        for e in &self.entries {
            match registry.last_mut() {
                Some((g, n)) if *g == e.group => *n += 1,
                _ => registry.push((e.group, 1)),
            }
        }
        certify(self, &registry)
    }

    /// True when no case failed. Skipped and did-not-apply cases are not failures, and
    /// are listed by [`Report::skipped`] and [`Report::did_not_apply`].
    pub fn is_success(&self) -> bool {
        self.failures().next().is_none()
    }

    /// Every failure, in registry order.
    pub fn failures(&self) -> impl Iterator<Item = &Failure> + '_ {
        self.entries.iter().filter_map(|e| match &e.status {
            Status::Failed(f) => Some(f),
            _ => None,
        })
    }

    /// The groups with at least one failed case.
    pub fn failed_groups(&self) -> BTreeSet<&'static str> {
        self.failures().map(|f| f.group).collect()
    }

    /// The names (`group::case`) of the cases that passed.
    pub fn passed(&self) -> Vec<String> {
        self.names(|s| matches!(s, Status::Passed))
    }

    /// The names of the cases skipped for a missing capability.
    pub fn skipped(&self) -> Vec<String> {
        self.names(|s| matches!(s, Status::Skipped { .. }))
    }

    /// The names of the cases that did not apply to this harness.
    pub fn did_not_apply(&self) -> Vec<String> {
        self.names(|s| matches!(s, Status::DidNotApply { .. }))
    }

    fn names(&self, keep: impl Fn(&Status) -> bool) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| keep(&e.status))
            .map(|e| format!("{}::{}", e.group, e.case))
            .collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.entries {
            match &e.status {
                Status::Passed => {}
                Status::Failed(failure) => writeln!(f, "FAILED  {failure}")?,
                Status::Skipped { reason } => {
                    writeln!(f, "skipped {}::{}: {reason}", e.group, e.case)?
                }
                Status::DidNotApply { reason } => {
                    writeln!(f, "did not apply {}::{}: {reason}", e.group, e.case)?
                }
            }
        }
        let count =
            |keep: fn(&Status) -> bool| self.entries.iter().filter(|e| keep(&e.status)).count();
        write!(
            f,
            "{} cases: {} passed, {} failed, {} skipped, {} did not apply",
            self.entries.len(),
            count(|s| matches!(s, Status::Passed)),
            count(|s| matches!(s, Status::Failed(_))),
            count(|s| matches!(s, Status::Skipped { .. })),
            count(|s| matches!(s, Status::DidNotApply { .. })),
        )
    }
}

/// What a case gets: a fresh, isolated store, the manual clock that store reads, and
/// the harness, for peer handles onto the same data.
pub struct Env<'a, H: Harness> {
    harness: &'a H,
    store: Arc<H::Store>,
    clock: ManualClock,
}

impl<'a, H: Harness> Env<'a, H> {
    pub(crate) fn new(harness: &'a H, store: H::Store, clock: ManualClock) -> Self {
        Env {
            harness,
            store: Arc::new(store),
            clock,
        }
    }

    /// The case's store.
    pub fn store(&self) -> &H::Store {
        &self.store
    }

    /// The case's store as a shared handle, for tasks.
    pub fn shared(&self) -> Arc<H::Store> {
        Arc::clone(&self.store)
    }

    /// The clock every handle of this case reads.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The clock's current instant.
    pub fn now(&self) -> Timestamp {
        tenure_core::Clock::now(&self.clock)
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// A second handle onto the same data (another pool, another open of the file).
    pub async fn peer(&self) -> Result<Arc<H::Store>, Failure> {
        self.harness
            .open_peer(&self.store, self.clock.clone())
            .await
            .map(Arc::new)
            .map_err(|e| Failure::new("the harness to open a peer handle", format!("Err({e})")))
    }

    /// `n` handles onto the case's data: the case's store first, then `n - 1` peers.
    pub async fn handles(&self, n: usize) -> Result<Vec<Arc<H::Store>>, Failure> {
        let mut handles = vec![self.shared()];
        while handles.len() < n {
            handles.push(self.peer().await?);
        }
        Ok(handles)
    }

    /// A snapshot of the case's data ([`Harness::snapshot`]), or the harness's reason
    /// for taking none.
    pub async fn snapshot(&self) -> Result<Snapshot, Failure> {
        self.harness
            .snapshot(&self.store)
            .await
            .map_err(|e| Failure::new("the harness to take a snapshot", format!("Err({e})")))
    }

    /// A store whose backend cannot be reached, or the harness's reason for having none.
    pub async fn unreachable(&self) -> Result<Unreachable<H::Store>, Failure> {
        self.harness
            .open_unreachable(self.clock.clone())
            .await
            .map_err(|e| {
                Failure::new(
                    "the harness to open an unreachable store",
                    format!("Err({e})"),
                )
            })
    }
}

impl<H: Harness> fmt::Debug for Env<'_, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("store", &self.store.name())
            .field("now", &self.now())
            .finish_non_exhaustive()
    }
}

/// Registers a group's cases, each named after its fn: `register![GROUP; case_fn, ...]`
/// for a mandatory group, `register![GROUP, Capability::X; case_fn, ...]` for an
/// optional one (G14 partitioned claiming), whose cases run only when the store
/// declares the capability.
macro_rules! register {
    ($group:expr; $($case:ident),* $(,)?) => {
        vec![$(
            $crate::case::Case::new($group, stringify!($case), None, |env| Box::pin($case(env)))
        ),*]
    };
    ($group:expr, $capability:expr; $($case:ident),* $(,)?) => {
        vec![$(
            $crate::case::Case::new(
                $group,
                stringify!($case),
                Some($capability),
                |env| Box::pin($case(env)),
            )
        ),*]
    };
}
pub(crate) use register;
