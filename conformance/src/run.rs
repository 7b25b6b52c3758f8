//! The two ways to run the registry's cases: [`main`] (one test per case,
//! through libtest-mimic) and [`run_all`] (one [`Report`] from any async test).

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use tenure_core::{ManualClock, Store};

use crate::case::{Case, Entry, Env, Failure, Report, Status, Verdict};
use crate::certificate::{certify, StoreInfo};
use crate::fixtures::START;
use crate::harness::Harness;
use crate::registry::cases;

/// The longest one case may run before it counts as failed (a store that hangs).
pub const CASE_TIME_LIMIT: Duration = Duration::from_secs(180);

/// Runs one case against a fresh store from `harness`: opens the store on a new
/// [`ManualClock`], skips the case if it needs a capability the store does not declare,
/// and turns a panic or a run longer than [`CASE_TIME_LIMIT`] into a failure.
pub async fn run_case<H: Harness>(harness: &H, case: &Case<H>) -> Status {
    run_case_noting(harness, case, &mut |_| {}).await
}

/// [`run_case`], telling `seen` which store the harness opened.
async fn run_case_noting<H: Harness>(
    harness: &H,
    case: &Case<H>,
    seen: &mut (dyn FnMut(StoreInfo) + Send),
) -> Status {
    let clock = ManualClock::new(START);
    let store = match harness.open(clock.clone()).await {
        Ok(store) => store,
        Err(e) => {
            return Status::Failed(
                Failure::new("the harness to open a fresh store", format!("Err({e})"))
                    .located(case.group, case.name),
            )
        }
    };
    seen(StoreInfo {
        name: store.name(),
        capabilities: store.capabilities(),
    });
    if let Some(cap) = case.capability {
        if !cap.declared_by(&store.capabilities()) {
            return Status::Skipped {
                reason: format!(
                    "capability {} not declared by the {} store",
                    cap.name(),
                    store.name()
                ),
            };
        }
    }
    let env = Env::new(harness, store, clock);
    let body = CatchUnwind((case.run)(env));
    let failed = |f: Failure| Status::Failed(f.located(case.group, case.name));
    match tokio::time::timeout(CASE_TIME_LIMIT, body).await {
        Ok(Ok(Ok(Verdict::Passed))) => Status::Passed,
        Ok(Ok(Ok(Verdict::DidNotApply { reason }))) => Status::DidNotApply { reason },
        Ok(Ok(Err(f))) => failed(f),
        Ok(Err(panic)) => failed(Failure::new(
            "the case to finish without a panic",
            format!("a panic: {}", panic_message(panic.as_ref())),
        )),
        Err(_) => failed(Failure::new(
            format!("the case to finish within {CASE_TIME_LIMIT:?}"),
            "it was still running",
        )),
    }
}

/// Runs every case, one after another, each against its own fresh store, and reports
/// all of them. Call it from any async test on a multi-thread runtime; the race cases
/// spawn tasks onto the current runtime.
pub async fn run_all<H: Harness>(harness: &H) -> Report {
    let mut report = Report::default();
    for case in cases::<H>() {
        let status = run_case_noting(harness, &case, &mut |info| {
            report.store.get_or_insert(info);
        })
        .await;
        report.entries.push(Entry {
            group: case.group,
            case: case.name,
            status,
        });
    }
    report
}

/// The entry point of a `harness = false` test target: one test per case, named
/// `group::case`, each on its own tokio multi-thread runtime (two worker threads), so
/// `cargo test --test conformance g03` runs one group and `-- --list` lists them all.
///
/// Skipped cases (a capability the store does not declare) and cases that did not
/// apply show as ignored with the reason; every mandatory case always runs.
///
/// After the run it prints the [`Certificate`](crate::Certificate): the store, the
/// groups passed, the cases, the capabilities declared, and one line per group that was
/// not certified and why (failed, skipped, did not apply, filtered out).
pub fn main<H: Harness>(harness: H) -> ExitCode {
    let args = Arguments::from_args();
    let harness = Arc::new(harness);
    let all = cases::<H>();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let trials = all
        .iter()
        .enumerate()
        .map(|(index, &case)| {
            let (harness, seen) = (Arc::clone(&harness), Arc::clone(&seen));
            Trial::ignorable_test(case.full_name(), move || {
                trial(&*harness, &case, index, &seen)
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if !args.list {
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        let mut entries = seen.entries;
        entries.sort_by_key(|(index, _)| *index);
        let report = Report {
            entries: entries.into_iter().map(|(_, e)| e).collect(),
            store: seen.store,
        };
        let mut registry: Vec<(&'static str, usize)> = Vec::new();
        for case in &all {
            match registry.last_mut() {
                Some((g, n)) if *g == case.group => *n += 1,
                _ => registry.push((case.group, 1)),
            }
        }
        println!("\n{}\n", certify(&report, &registry));
    }
    conclusion.exit_code()
}

/// What the trials of one [`main`] run saw: each case's entry by registry index, and
/// the store.
#[derive(Clone, Default)]
struct Seen {
    entries: Vec<(usize, Entry)>,
    store: Option<StoreInfo>,
}

fn trial<H: Harness>(
    harness: &H,
    case: &Case<H>,
    index: usize,
    seen: &Mutex<Seen>,
) -> Result<Completion, Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(format!("could not start a tokio runtime: {e}")))?;
    let mut info = None;
    let status = runtime.block_on(run_case_noting(harness, case, &mut |i| info = Some(i)));
    if let Ok(mut seen) = seen.lock() {
        if seen.store.is_none() {
            seen.store = info;
        }
        seen.entries.push((
            index,
            Entry {
                group: case.group,
                case: case.name,
                status: status.clone(),
            },
        ));
    }
    match status {
        Status::Passed => Ok(Completion::Completed),
        Status::Failed(f) => Err(Failed::from(f)),
        Status::Skipped { reason } => Ok(Completion::ignored_with(format!("skipped: {reason}"))),
        Status::DidNotApply { reason } => {
            Ok(Completion::ignored_with(format!("did not apply: {reason}")))
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

/// Polls a future, turning a panic into an `Err` so one broken store cannot stop the
/// rest of a [`run_all`] run.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
