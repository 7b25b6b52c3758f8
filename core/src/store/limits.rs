//! The limits a queue keeps on its claims: concurrency (G16), rate (G17) and fair
//! shares (G18), and the params of the `limits_*` operations of
//! [`Store`](super::Store).
//!
//! # The model
//!
//! An item names, at enqueue, a [`LimitKey`] (what its per-key limits count it under:
//! a tenant, an external API), a [`FairnessKey`] (the tenant whose share serves it) and
//! a weight ([`NewItem::weight`](crate::NewItem::weight)). A queue holds one
//! [`QueueLimits`], set, changed and cleared at run time by
//! [`Store::limits_set`](super::Store::limits_set) and
//! [`Store::limits_clear`](super::Store::limits_clear):
//!
//! - **concurrency** (G16): at most `concurrency` running items in the queue, and at
//!   most `key_concurrency` (or the key's override) running items per limit key;
//! - **rate** (G17): at most `rate.starts` claims per `rate.per` in the queue, and per
//!   limit key with `key_rate`, exact in every window of that length;
//! - **fair shares** (G18): under contention a claim serves the queue's tenants by
//!   weight.
//!
//! # A slot is a lease
//!
//! The running count of a key is never a counter that writers keep: it is the number
//! of the key's items that are `running` with a lease, counted in the same atomic step
//! as the claim that takes a slot. A slot therefore comes back exactly when its lease
//! leaves `running`: by its own token (complete, fail, release, all fenced by G3), by
//! expiry recovery or by eviction. A superseded lease's late finish is refused by G3
//! and changes nothing, so it frees nothing (the Solid Queue #761 failure: a stale job
//! released its semaphore twice and a `limit: 1` job ran 11 times at once). A rate's
//! start is kept the same way: a claim records its start, and the start counts for one
//! period; nothing but time takes it back.
//!
//! # Scopes (G10)
//!
//! Scopes stay beside limits, unchanged. A scope is global (one running item per scope
//! across every queue), needs no configuration, and on PostgreSQL its bound is a
//! schema invariant (a partial unique index); a limit key is counted per queue, with a
//! bound that changes at run time. A limit key with `key_concurrency = 1` within one
//! queue is the per-queue scope; the two compose: an item with both is claimable only
//! when both allow it.
//!
//! # Fair shares
//!
//! Start-time fair queueing by tenant: each tenant of a queue has a virtual finish
//! tag; a claim takes, among the tenants that have a claimable item, the one with the
//! least tag, then that tenant's first item in G8 order, and moves the tenant's tag on
//! by `1 / weight` (a tenant idle for a while comes back at the queue's virtual time,
//! never with banked credit). So a tenant with one ready item beside one with a
//! million is served within one turn of the tenants, and two busy tenants of weights
//! 1 and 3 get claims in the ratio 1 : 3. The share is kept per fairness key, never
//! per limit key: a tenant that spreads its work over many limit keys gains nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{FairnessKey, LimitKey, QueueName};
use crate::model::MAX_WEIGHT;

use super::params::Limits;

/// Largest concurrency limit, queue-wide or per key.
pub const MAX_CONCURRENCY: u32 = 1_000_000;
/// Most starts a rate may allow per period (a store keeps up to this many start
/// times per key, so the window is exact).
pub const MAX_RATE_STARTS: u32 = 100_000;
/// Shortest rate period.
pub const MIN_RATE_PERIOD: Duration = Duration::from_secs(1);
/// Longest rate period.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);
/// Most per-key overrides and most fairness weights one queue's limits may hold.
pub const MAX_LIMIT_ENTRIES: usize = 10_000;
/// Longest a handler may push a key's next start back ([`DeferParams`]).
pub const MAX_DEFER: Duration = Duration::from_secs(24 * 60 * 60);

/// At most `starts` claims in every window of length `per` (G17).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rate {
    /// Claims allowed per window (1..=[`MAX_RATE_STARTS`]).
    pub starts: u32,
    /// The window ([`MIN_RATE_PERIOD`]..=[`MAX_RATE_PERIOD`]).
    pub per: Duration,
}

impl Rate {
    /// At most `starts` claims in every window of length `per`.
    pub fn new(starts: u32, per: Duration) -> Self {
        Rate { starts, per }
    }

    fn validate(&self) -> Result<()> {
        if self.starts == 0 || self.starts > MAX_RATE_STARTS {
            return Err(Error::invalid(
                "rate",
                format!("{} starts is outside 1..={MAX_RATE_STARTS}", self.starts),
            ));
        }
        if self.per < MIN_RATE_PERIOD || self.per > MAX_RATE_PERIOD {
            return Err(Error::invalid(
                "period",
                format!(
                    "{:?} is outside {MIN_RATE_PERIOD:?}..={MAX_RATE_PERIOD:?}",
                    self.per
                ),
            ));
        }
        Ok(())
    }
}

/// The limits of one queue (G16, G17, G18). Every field left unset means no such
/// limit; [`QueueLimits::default`] limits nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueLimits {
    /// Most running items in the queue (G16).
    pub concurrency: Option<u32>,
    /// Most running items per limit key, for keys without an override (G16).
    pub key_concurrency: Option<u32>,
    /// Most running items of these limit keys, over `key_concurrency` (G16).
    pub key_overrides: BTreeMap<LimitKey, u32>,
    /// Most claims per period in the queue (G17).
    pub rate: Option<Rate>,
    /// Most claims per period per limit key (G17).
    pub key_rate: Option<Rate>,
    /// Fair-share weights of tenants, over the weight their items declare (G18).
    pub weights: BTreeMap<FairnessKey, u32>,
}

impl QueueLimits {
    /// No limit at all.
    pub fn new() -> Self {
        QueueLimits::default()
    }

    /// At most `n` running items in the queue.
    pub fn concurrency(mut self, n: u32) -> Self {
        self.concurrency = Some(n);
        self
    }

    /// At most `n` running items per limit key (the default of every key).
    pub fn per_key(mut self, n: u32) -> Self {
        self.key_concurrency = Some(n);
        self
    }

    /// At most `n` running items of `key`, whatever the per-key default.
    pub fn key_override(mut self, key: LimitKey, n: u32) -> Self {
        self.key_overrides.insert(key, n);
        self
    }

    /// At most `rate` claims in the queue.
    pub fn rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// At most `rate` claims per limit key.
    pub fn key_rate(mut self, rate: Rate) -> Self {
        self.key_rate = Some(rate);
        self
    }

    /// Tenant `key` weighs `weight` in fair shares, whatever its items declare.
    pub fn weight(mut self, key: FairnessKey, weight: u32) -> Self {
        self.weights.insert(key, weight);
        self
    }

    /// The most running items of `key`: its override, else the per-key default, else
    /// none.
    pub fn key_limit(&self, key: &LimitKey) -> Option<u32> {
        self.key_overrides
            .get(key)
            .copied()
            .or(self.key_concurrency)
    }

    /// The weight of tenant `key` whose item declares `declared`: the configured
    /// weight when there is one.
    pub fn weight_of(&self, key: Option<&FairnessKey>, declared: u32) -> u32 {
        key.and_then(|k| self.weights.get(k).copied())
            .unwrap_or(declared)
            .max(1)
    }

    /// True when it limits nothing and weighs nobody.
    pub fn is_empty(&self) -> bool {
        *self == QueueLimits::default()
    }

    /// Checks every bound (G15): a limit of 0 or over [`MAX_CONCURRENCY`] names
    /// `concurrency`, `key_concurrency` or `key_override`; a rate names `rate` (its
    /// starts) or `period`; a weight of 0 or over [`MAX_WEIGHT`] names `weight`; more
    /// than [`MAX_LIMIT_ENTRIES`] overrides or weights names the map.
    pub fn validate(&self) -> Result<()> {
        let check = |field: &'static str, n: u32| {
            if n == 0 || n > MAX_CONCURRENCY {
                return Err(Error::invalid(
                    field,
                    format!("{n} is outside 1..={MAX_CONCURRENCY}"),
                ));
            }
            Ok(())
        };
        if let Some(n) = self.concurrency {
            check("concurrency", n)?;
        }
        if let Some(n) = self.key_concurrency {
            check("key_concurrency", n)?;
        }
        if self.key_overrides.len() > MAX_LIMIT_ENTRIES {
            return Err(Error::invalid(
                "key_override",
                format!(
                    "{} overrides; the limit is {MAX_LIMIT_ENTRIES}",
                    self.key_overrides.len()
                ),
            ));
        }
        for &n in self.key_overrides.values() {
            check("key_override", n)?;
        }
        for rate in self.rate.iter().chain(self.key_rate.iter()) {
            rate.validate()?;
        }
        if self.weights.len() > MAX_LIMIT_ENTRIES {
            return Err(Error::invalid(
                "weight",
                format!(
                    "{} weights; the limit is {MAX_LIMIT_ENTRIES}",
                    self.weights.len()
                ),
            ));
        }
        for &w in self.weights.values() {
            check_weight(w)?;
        }
        Ok(())
    }
}

/// Checks a fair-share weight: 1..=[`MAX_WEIGHT`], naming `weight`.
pub(crate) fn check_weight(w: u32) -> Result<()> {
    if w == 0 || w > MAX_WEIGHT {
        return Err(Error::invalid(
            "weight",
            format!("{w} is outside 1..={MAX_WEIGHT}"),
        ));
    }
    Ok(())
}

/// Parameters of [`Store::limits_set`](super::Store::limits_set).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LimitsParams {
    /// The queue.
    pub queue: QueueName,
    /// Its limits from now on, replacing what it had.
    pub limits: QueueLimits,
}

impl LimitsParams {
    /// `queue` keeps `limits` from now on.
    pub fn new(queue: QueueName, limits: QueueLimits) -> Self {
        LimitsParams { queue, limits }
    }

    /// Checks the limits (G15; see [`QueueLimits::validate`]).
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        self.limits.validate()
    }
}

/// Parameters of [`Store::limits_defer`](super::Store::limits_defer): no claim of the
/// queue's items of `key` (or of any of its items, with no key) starts before
/// `now + delay`, as a handler that was answered "429, retry in 30 s" asks.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeferParams {
    /// The queue.
    pub queue: QueueName,
    /// The limit key whose starts wait; `None`: the whole queue's.
    pub key: Option<LimitKey>,
    /// How long from the store's `now` (1 ms..=[`MAX_DEFER`]).
    pub delay: Duration,
}

impl DeferParams {
    /// No start of `key`'s items in `queue` before `delay` from now.
    pub fn new(queue: QueueName, key: Option<LimitKey>, delay: Duration) -> Self {
        DeferParams { queue, key, delay }
    }

    /// Checks the delay, naming `delay` (G15).
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        if self.delay < Duration::from_millis(1) || self.delay > MAX_DEFER {
            return Err(Error::invalid(
                "delay",
                format!("{:?} is outside 1ms..={MAX_DEFER:?}", self.delay),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> LimitKey {
        LimitKey::new(s).unwrap()
    }

    #[test]
    fn zero_and_absurd_limits_name_their_field() {
        let cases: Vec<(QueueLimits, &str)> = vec![
            (QueueLimits::new().concurrency(0), "concurrency"),
            (
                QueueLimits::new().concurrency(MAX_CONCURRENCY + 1),
                "concurrency",
            ),
            (QueueLimits::new().per_key(0), "key_concurrency"),
            (QueueLimits::new().key_override(key("k"), 0), "key_override"),
            (
                QueueLimits::new().rate(Rate::new(0, Duration::from_secs(1))),
                "rate",
            ),
            (
                QueueLimits::new().key_rate(Rate::new(5, Duration::from_millis(999))),
                "period",
            ),
            (
                QueueLimits::new().weight(FairnessKey::new("t").unwrap(), 0),
                "weight",
            ),
        ];
        for (limits, field) in cases {
            let e = LimitsParams::new(QueueName::new("q").unwrap(), limits)
                .validate(&Limits::default())
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some(field));
        }
        assert!(QueueLimits::new()
            .concurrency(MAX_CONCURRENCY)
            .per_key(1)
            .rate(Rate::new(MAX_RATE_STARTS, MIN_RATE_PERIOD))
            .validate()
            .is_ok());
    }

    #[test]
    fn an_override_wins_over_the_per_key_default() {
        let l = QueueLimits::new().per_key(5).key_override(key("hot"), 1);
        assert_eq!(l.key_limit(&key("hot")), Some(1));
        assert_eq!(l.key_limit(&key("cold")), Some(5));
        assert_eq!(QueueLimits::new().key_limit(&key("any")), None);
    }
}
