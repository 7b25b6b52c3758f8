//! [`Capabilities`]: the optional features a store declares.

// The docs name them.
#[cfg(doc)]
use super::{ClaimParams, QueueLimits, WakeSignal};

/// Optional features a store may offer. Mandatory guarantees are not listed: every
/// store keeps all of G1..G13 and G15.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// G14 partitioned claiming.
    pub partitioned_claiming: bool,
    /// Wake-ups from other processes (for example Postgres LISTEN/NOTIFY). Every store
    /// may hand out an in-process [`WakeSignal`] regardless.
    pub cross_process_wakeups: bool,
    /// Stream runs: a claim with [`ClaimParams::stream_runs`] leases up to `k`
    /// consecutive items of one stream (G9). Stores without it claim heads only.
    pub stream_runs: bool,
    /// Queue limits: concurrency (G16) and rate (G17), with the `limits_*` operations
    /// and the items' limit keys. Optional while not every store has them: the
    /// PostgreSQL store does not yet.
    pub limits: bool,
    /// Fair shares (G18): claims serve the tenants of a queue by fairness key and
    /// weight. Stores without it refuse items with a fairness key
    /// ([`Error::Unsupported`](crate::Error::Unsupported)).
    pub fair_shares: bool,
}

impl Capabilities {
    /// Declares G14 partitioned claiming.
    pub fn with_partitioned_claiming(mut self) -> Self {
        self.partitioned_claiming = true;
        self
    }

    /// Declares wake-ups from other processes.
    pub fn with_cross_process_wakeups(mut self) -> Self {
        self.cross_process_wakeups = true;
        self
    }

    /// Declares stream runs.
    pub fn with_stream_runs(mut self) -> Self {
        self.stream_runs = true;
        self
    }

    /// Declares queue limits (G16, G17).
    pub fn with_limits(mut self) -> Self {
        self.limits = true;
        self
    }

    /// Declares fair shares (G18).
    pub fn with_fair_shares(mut self) -> Self {
        self.fair_shares = true;
        self
    }
}
