//! The honest harnesses, and the assertions every flaw is held to.

use std::fmt;

use super::*;

/// Fresh memory stores; `keep_done` chooses whether finished items are kept.
pub(crate) struct MemoryHarness {
    pub(crate) keep_done: bool,
    pub(crate) unreachable: bool,
}

#[async_trait]
impl Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        Ok(MemoryStore::new(clock).keep_done(self.keep_done))
    }

    async fn open_peer(&self, store: &MemoryStore, _clock: ManualClock) -> Result<MemoryStore> {
        Ok(store.clone())
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<MemoryStore>> {
        if !self.unreachable {
            return Ok(Unreachable::not_offered(
                "this harness keeps its store reachable",
            ));
        }
        let store = MemoryStore::new(clock);
        store.set_available(false);
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &MemoryStore) -> Result<Snapshot> {
        rewind(store)
    }
}

/// The honest harness without [`Harness::snapshot`]: a third party's harness that has
/// not written one.
pub(crate) struct WithoutSnapshots(pub(crate) MemoryHarness);

#[async_trait]
impl Harness for WithoutSnapshots {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        self.0.open(clock).await
    }

    async fn open_peer(&self, store: &MemoryStore, clock: ManualClock) -> Result<MemoryStore> {
        self.0.open_peer(store, clock).await
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<MemoryStore>> {
        self.0.open_unreachable(clock).await
    }
}

/// A snapshot of a memory store that puts its data back (a forgetful failover).
pub(crate) fn rewind(store: &MemoryStore) -> Result<Snapshot> {
    struct Rewind(MemoryStore, MemorySnapshot);
    #[async_trait]
    impl Restore for Rewind {
        async fn restore(self: Box<Self>) -> Result<()> {
            self.0.restore(&self.1)
        }
    }
    Ok(Snapshot::taken(Rewind(store.clone(), store.snapshot()?)))
}

/// Runs the whole suite against the flawed store: the group of the broken guarantee
/// must fail, and in it the case that names the behaviour most directly. Prints the
/// other groups it also failed.
pub(crate) async fn must_fail<H: Harness + fmt::Debug>(flaw: H, group: &str, case: &str) {
    let report = run_all(&flaw).await;
    let failed = report.failed_groups();
    let in_group: Vec<&str> = report
        .failures()
        .filter(|f| f.group == group)
        .map(|f| f.case)
        .collect();
    eprintln!("{flaw:?}: failed groups {failed:?}; failed in {group}: {in_group:?}",);
    assert!(
        failed.contains(group),
        "{flaw:?} must fail {group}, but it failed only {failed:?}\n{report}"
    );
    assert!(
        in_group.contains(&case),
        "{flaw:?} must fail {group}::{case}; it failed {in_group:?}\n{report}"
    );
}

/// Like [`must_fail`], for a flaw the rest of the suite cannot see: `group::case` is
/// the one case it fails, so without that case the suite would pass it.
pub(crate) async fn must_fail_only<H: Harness + fmt::Debug>(flaw: H, group: &str, case: &str) {
    let report = run_all(&flaw).await;
    let failed: Vec<(&str, &str)> = report.failures().map(|f| (f.group, f.case)).collect();
    eprintln!("{flaw:?}: failed {failed:?}");
    assert_eq!(
        failed,
        [(group, case)],
        "{flaw:?} must fail {group}::{case} and nothing else\n{report}"
    );
}

/// Like [`must_fail`], for a flaw that must fail every one of `in_cases` of `group`,
/// from one run.
pub(crate) async fn must_fail_each<H: Harness + fmt::Debug>(
    flaw: H,
    group: &str,
    in_cases: &[&str],
) {
    let report = run_all(&flaw).await;
    let in_group: Vec<&str> = report
        .failures()
        .filter(|f| f.group == group)
        .map(|f| f.case)
        .collect();
    eprintln!("{flaw:?}: failed in {group}: {in_group:?}");
    for case in in_cases {
        assert!(
            in_group.contains(case),
            "{flaw:?} must fail {group}::{case}; it failed {in_group:?}\n{report}"
        );
    }
}

pub(crate) fn assert_all_passed(report: &Report) {
    assert!(report.is_success(), "{report}");
    assert!(report.skipped().is_empty(), "{report}");
    assert_eq!(
        report.passed().len(),
        cases::<MemoryHarness>().len(),
        "{report}"
    );
}
