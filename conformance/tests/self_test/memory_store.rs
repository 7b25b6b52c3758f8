//! The honest memory store passes every case, and a run says what it could not certify.

use super::*;
use crate::g10::ScopesPerQueue;
use crate::g14::ClaimsAllWithoutThePartitionCapability;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_every_case_deleting_finished_items() {
    let report = run_all(&MemoryHarness {
        keep_done: false,
        unreachable: true,
    })
    .await;
    assert_all_passed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_every_case_keeping_finished_items() {
    let report = run_all(&MemoryHarness {
        keep_done: true,
        unreachable: true,
    })
    .await;
    assert_all_passed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_unreachable_store_the_fault_case_reports_did_not_apply() {
    let report = run_all(&MemoryHarness {
        keep_done: false,
        unreachable: false,
    })
    .await;
    assert!(report.is_success(), "{report}");
    assert_eq!(
        report.did_not_apply(),
        vec![
            "g13_leader::an_unreachable_store_is_an_error_never_a_follower".to_owned(),
            "g13_leader::reading_the_leader_of_an_unreachable_store_is_an_error_never_none"
                .to_owned(),
        ],
    );
    assert!(
        report.to_string().contains("did not apply g13_leader::"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_snapshots_the_forgetful_failover_is_not_certified_saying_why() {
    let report = run_all(&WithoutSnapshots(MemoryHarness {
        keep_done: false,
        unreachable: true,
    }))
    .await;
    assert!(report.is_success(), "{report}");
    assert_eq!(
        report.did_not_apply(),
        vec![
            "g03_fenced_finalize::a_claim_lost_in_a_failover_leaves_its_token_refused".to_owned(),
            "g16_concurrency_limits::a_claim_lost_in_a_failover_frees_no_slot_through_its_token"
                .to_owned(),
        ],
    );
    let cert = report.certificate();
    assert!(!cert.is_complete(), "{cert}");
    assert_eq!(cert.not_certified.len(), 2, "{cert}");
    for (line, group) in cert
        .not_certified
        .iter()
        .zip(["g03_fenced_finalize: ", "g16_concurrency_limits: "])
    {
        assert!(
            line.starts_with(group) && line.contains("does not implement Harness::snapshot"),
            "{line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_unreachable_store_the_certificate_leaves_g13_uncertified_saying_why() {
    let report = run_all(&MemoryHarness {
        keep_done: false,
        unreachable: false,
    })
    .await;
    let cert = report.certificate();
    assert!(!cert.is_complete(), "{cert}");
    assert_eq!(cert.not_certified.len(), 1, "{cert}");
    let line = &cert.not_certified[0];
    assert!(line.starts_with("g13_leader: "), "{line}");
    assert!(
        line.contains("an_unreachable_store_is_an_error_never_a_follower")
            && line.contains("this harness keeps its store reachable"),
        "{line}"
    );
    assert!(!cert.groups_passed.contains(&"g13_leader"), "{cert}");
    assert_eq!(cert.groups_passed.len(), cert.groups - 1, "{cert}");
    let text = cert.to_string();
    assert!(text.contains("not certified:\n    g13_leader: "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_run_certifies_every_group_naming_store_cases_and_capabilities() {
    let report = run_all(&MemoryHarness {
        keep_done: false,
        unreachable: true,
    })
    .await;
    let cert = report.certificate();
    assert!(cert.is_complete(), "{cert}");
    assert_eq!(cert.store, Some("memory"), "{cert}");
    assert_eq!(cert.groups_passed.len(), cert.groups, "{cert}");
    assert_eq!(cert.cases, cases::<MemoryHarness>().len(), "{cert}");
    assert_eq!(cert.passed, cert.cases, "{cert}");
    let caps = MemoryStore::new(ManualClock::default()).capabilities();
    assert!(caps.partitioned_claiming, "the memory store declares G14");
    assert!(
        cert.capabilities.contains(&"partitioned_claiming")
            && !cert.capabilities.contains(&"cross_process_wakeups"),
        "{cert}"
    );
    let text = cert.to_string();
    for want in [
        "memory store",
        &format!("groups passed: {0} of {0}", cert.groups),
        &format!("cases: {0} of {0} passed", cert.cases),
        &format!("capabilities declared: {}", cert.capabilities.join(", ")),
        "not certified: nothing",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_skipped_groups_are_not_certified_one_line_each() {
    // Breaks G10 across queues only.
    let report = run_all(&broken::<ScopesPerQueue>()).await;
    let cert = report.certificate();
    let g10: Vec<&String> = cert
        .not_certified
        .iter()
        .filter(|l| l.starts_with("g10_scope: "))
        .collect();
    assert_eq!(g10.len(), 1, "{cert}");
    assert!(
        g10[0].contains("failed") && g10[0].contains("a_busy_scope_is_passed_over_in_every_queue"),
        "{cert}"
    );
    let skipping = run_all(&broken::<ClaimsAllWithoutThePartitionCapability>()).await;
    let cert = skipping.certificate();
    assert!(cert.capabilities.is_empty(), "{cert}");
    assert!(
        cert.not_certified
            .iter()
            .any(|l| l.starts_with("g14_partitioned_claiming: ")
                && l.contains("skipped: capability partitioned_claiming not declared")),
        "{cert}"
    );
}
