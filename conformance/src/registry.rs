//! The registry: every group of the suite, in the order a run shows them. Each group
//! is a module named after its guarantee that owns its cases and lists them once, in
//! its `cases()`; this list is the only place a group is named.

use crate::case::Case;
use crate::harness::Harness;

/// Every case of the suite, group by group: the single registry both runners use.
pub fn cases<H: Harness>() -> Vec<Case<H>> {
    let groups: [fn() -> Vec<Case<H>>; 21] = [
        crate::g01_exclusive_claim::cases::<H>,
        crate::g02_expiry::cases::<H>,
        crate::g03_fenced_finalize::cases::<H>,
        crate::g04_renewal_cap::cases::<H>,
        crate::g05_retry::cases::<H>,
        crate::g06_stalls::cases::<H>,
        crate::g07_schedule::cases::<H>,
        crate::g08_order::cases::<H>,
        crate::g09_stream_fifo::cases::<H>,
        crate::g10_scope::cases::<H>,
        crate::g11_dedup::cases::<H>,
        crate::g12_instances::cases::<H>,
        crate::g13_leader::cases::<H>,
        crate::g14_partitioned_claiming::cases::<H>,
        crate::g15_bad_input::cases::<H>,
        crate::g16_concurrency_limits::cases::<H>,
        crate::g17_rate_limits::cases::<H>,
        crate::g18_fair_shares::cases::<H>,
        // The operator's inspection and control, after the guarantees.
        crate::op_inspection::cases::<H>,
        crate::op_control::cases::<H>,
        crate::op_history::cases::<H>,
    ];
    groups.iter().flat_map(|group| group()).collect()
}
