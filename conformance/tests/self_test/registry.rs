//! The registry: unique snake-case names over every group, capability skips and panics.

use super::*;
use crate::g14::ClaimsAllWithoutThePartitionCapability;

const GROUPS: [&str; 21] = [
    "g01_exclusive_claim",
    "g02_expiry",
    "g03_fenced_finalize",
    "g04_renewal_cap",
    "g05_retry",
    "g06_stalls",
    "g07_schedule",
    "g08_order",
    "g09_stream_fifo",
    "g10_scope",
    "g11_dedup",
    "g12_instances",
    "g13_leader",
    "g14_partitioned_claiming",
    "g15_bad_input",
    "g16_concurrency_limits",
    "g17_rate_limits",
    "g18_fair_shares",
    "op_inspection",
    "op_control",
    "op_history",
];

#[test]
fn holds_at_least_45_uniquely_named_cases_over_every_mandatory_group() {
    let all = cases::<MemoryHarness>();
    assert!(all.len() >= 45, "{} cases", all.len());
    let names: HashSet<String> = all.iter().map(|c| c.full_name()).collect();
    assert_eq!(names.len(), all.len(), "case names must be unique");
    let groups: BTreeSet<&str> = all.iter().map(|c| c.group).collect();
    assert_eq!(groups, GROUPS.into_iter().collect::<BTreeSet<_>>());
    for c in &all {
        assert!(
            c.name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_'),
            "{} is not a snake-case sentence",
            c.full_name()
        );
        if c.group != "g14_partitioned_claiming"
            && c.capability != Some(Capability::StreamRuns)
            && c.capability != Some(Capability::Limits)
            && c.capability != Some(Capability::FairShares)
        {
            assert_eq!(
                c.capability,
                None,
                "{}: mandatory cases have no capability",
                c.full_name()
            );
        }
    }
    let optional = all
        .iter()
        .filter(|c| c.capability == Some(Capability::PartitionedClaiming))
        .count();
    let g14 = all
        .iter()
        .filter(|c| c.group == "g14_partitioned_claiming")
        .count();
    // G14's first case is mandatory, and so is the first case of pinning at enqueue.
    assert_eq!(
        optional + 2,
        g14,
        "G14's mandatory cases: the partitioned claim and the pinned enqueue"
    );
}

fn partitioned_case<H: Harness>() -> Case<H> {
    Case::new(
        "g14_partitioned_claiming",
        "a_capability_case",
        Some(Capability::PartitionedClaiming),
        |_env| Box::pin(async { Ok(Verdict::Passed) }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_case_needing_an_undeclared_capability_is_skipped_with_the_reason() {
    let harness = broken::<ClaimsAllWithoutThePartitionCapability>();
    match run_case(&harness, &partitioned_case()).await {
        Status::Skipped { reason } => {
            assert!(reason.contains("partitioned_claiming"), "{reason}")
        }
        other => panic!("expected a skip, got {other:?}"),
    }
}

async fn panics(_env: Env<'_, MemoryHarness>) -> CaseResult {
    panic!("deliberate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_case_is_reported_as_a_failure_not_a_crash() {
    let harness = MemoryHarness {
        keep_done: false,
        unreachable: true,
    };
    let case: Case<MemoryHarness> =
        Case::new("g00_demo", "panics", None, |env| Box::pin(panics(env)));
    match run_case(&harness, &case).await {
        Status::Failed(f) => {
            assert_eq!((f.group, f.case), ("g00_demo", "panics"));
            assert!(f.observed.contains("deliberate"), "{f}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
