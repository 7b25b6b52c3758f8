//! The short certificate a run ends with: which store, which groups passed, how many
//! cases, which capabilities it declared, and what was not certified and why.

use std::collections::BTreeMap;
use std::fmt;

use tenure_core::Capabilities;

use crate::case::{Capability, Report, Status};

/// The store a run was made against, as it described itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreInfo {
    /// [`Store::name`](tenure_core::Store::name).
    pub name: &'static str,
    /// [`Store::capabilities`](tenure_core::Store::capabilities).
    pub capabilities: Capabilities,
}

/// What one run certifies. Built by [`Report::certificate`]; its `Display` is the
/// few lines [`main`](crate::main) prints at the end of every run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Certificate {
    /// The store's name, or `None` when no case got as far as opening a store.
    pub store: Option<&'static str>,
    /// Groups every one of whose cases ran and passed, in registry order.
    pub groups_passed: Vec<&'static str>,
    /// Groups in the registry.
    pub groups: usize,
    /// Cases in the registry.
    pub cases: usize,
    /// Cases that ran and passed.
    pub passed: usize,
    /// The optional capabilities the store declared, by name.
    pub capabilities: Vec<&'static str>,
    /// One line per group not certified: `group: why`.
    pub not_certified: Vec<String>,
}

impl Certificate {
    /// True when every group of the registry was certified.
    pub fn is_complete(&self) -> bool {
        self.not_certified.is_empty()
    }
}

/// The names of the capabilities `caps` declares.
pub(crate) fn capability_names(caps: &Capabilities) -> Vec<&'static str> {
    // Matched without a wildcard, so a new capability does not compile until listed.
    let listed = |c: Capability| match c {
        Capability::PartitionedClaiming
        | Capability::CrossProcessWakeups
        | Capability::StreamRuns
        | Capability::Limits
        | Capability::FairShares => c,
    };
    [
        Capability::PartitionedClaiming,
        Capability::CrossProcessWakeups,
        Capability::StreamRuns,
        Capability::Limits,
        Capability::FairShares,
    ]
    .into_iter()
    .map(listed)
    .filter(|c| c.declared_by(caps))
    .map(Capability::name)
    .collect()
}

/// Builds the certificate of `report` against a registry of `registry` cases per
/// group (in registry order); cases of the registry missing from the report were not
/// run (filtered out).
pub(crate) fn certify(report: &Report, registry: &[(&'static str, usize)]) -> Certificate {
    let mut by_group: BTreeMap<&'static str, Vec<(&'static str, &Status)>> = BTreeMap::new();
    for e in &report.entries {
        by_group
            .entry(e.group)
            .or_default()
            .push((e.case, &e.status));
    }
    let mut groups_passed = Vec::new();
    let mut not_certified = Vec::new();
    for &(group, total) in registry {
        let ran = by_group.get(group).map(Vec::as_slice).unwrap_or_default();
        let of = |keep: fn(&Status) -> bool| -> Vec<(&'static str, &Status)> {
            ran.iter().filter(|(_, s)| keep(s)).copied().collect()
        };
        let failed = of(|s| matches!(s, Status::Failed(_)));
        let skipped = of(|s| matches!(s, Status::Skipped { .. }));
        let dna = of(|s| matches!(s, Status::DidNotApply { .. }));
        let mut why = Vec::new();
        if !failed.is_empty() {
            let names: Vec<&str> = failed.iter().map(|(c, _)| *c).collect();
            why.push(format!(
                "{} of {total} cases failed ({})",
                failed.len(),
                names.join(", ")
            ));
        }
        if let Some((_, Status::Skipped { reason })) = skipped.first() {
            why.push(format!(
                "{} of {total} cases skipped: {reason}",
                skipped.len()
            ));
        }
        for (case, status) in &dna {
            if let Status::DidNotApply { reason } = status {
                why.push(format!("{case} did not apply: {reason}"));
            }
        }
        if ran.len() < total {
            why.push(format!(
                "{} of {total} cases not run (filtered out)",
                total - ran.len()
            ));
        }
        if why.is_empty() {
            groups_passed.push(group);
        } else {
            not_certified.push(format!("{group}: {}", why.join("; ")));
        }
    }
    let (store, capabilities) = match &report.store {
        Some(info) => (Some(info.name), capability_names(&info.capabilities)),
        None => (None, Vec::new()),
    };
    Certificate {
        store,
        groups_passed,
        groups: registry.len(),
        cases: registry.iter().map(|(_, n)| n).sum(),
        passed: report
            .entries
            .iter()
            .filter(|e| matches!(e.status, Status::Passed))
            .count(),
        capabilities,
        not_certified,
    }
}

impl fmt::Display for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "tenure conformance certificate: {} store",
            self.store.unwrap_or("(no store opened)")
        )?;
        writeln!(
            f,
            "  groups passed: {} of {}{}",
            self.groups_passed.len(),
            self.groups,
            if self.groups_passed.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.groups_passed.join(", "))
            }
        )?;
        writeln!(f, "  cases: {} of {} passed", self.passed, self.cases)?;
        let caps = if self.capabilities.is_empty() {
            "none".to_owned()
        } else {
            self.capabilities.join(", ")
        };
        writeln!(f, "  capabilities declared: {caps}")?;
        if self.not_certified.is_empty() {
            write!(f, "  not certified: nothing")
        } else {
            write!(f, "  not certified:")?;
            for line in &self.not_certified {
                write!(f, "\n    {line}")?;
            }
            Ok(())
        }
    }
}
