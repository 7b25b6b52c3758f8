//! Params of the dead-item operations of the [`Inspect`](crate::contract::Inspect)
//! group: requeue and discard.

use crate::error::{Error, Result};
use crate::model::{ItemId, MAX_ATTEMPTS_LIMIT};
use crate::store::operate::DeadFilter;

use super::Limits;

/// Parameters of [`Store::dead_requeue`](crate::Store::dead_requeue).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RequeueParams {
    /// Dead items to put back to ready. Ids that are not dead are left alone.
    pub ids: Vec<ItemId>,
    /// Attempts granted on top of those already made: `max_attempts` becomes at least
    /// `attempt + additional_attempts`. Default 1. `attempt` itself never goes down.
    pub additional_attempts: u32,
    /// Requeue the dead items this filter matches instead of `ids` (which is then
    /// empty), at most `filter.limit` of them in this call.
    pub filter: Option<DeadFilter>,
}

impl RequeueParams {
    /// Requeue these dead items with one more attempt each.
    pub fn new(ids: Vec<ItemId>) -> Self {
        RequeueParams {
            ids,
            additional_attempts: 1,
            filter: None,
        }
    }

    /// Requeue the dead items `filter` matches (at most `filter.limit` per call), with
    /// one more attempt each.
    pub fn matching(filter: DeadFilter) -> Self {
        RequeueParams {
            ids: Vec::new(),
            additional_attempts: 1,
            filter: Some(filter),
        }
    }

    /// Grants `n` more attempts instead of one.
    pub fn additional_attempts(mut self, n: u32) -> Self {
        self.additional_attempts = n;
        self
    }

    /// Checks the batch bounds, or the filter (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        match &self.filter {
            Some(f) => f.validate(limits)?,
            None => limits.check_batch("ids", self.ids.len(), limits.max_enqueue_batch)?,
        }
        if self.additional_attempts == 0 || self.additional_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(Error::invalid(
                "additional_attempts",
                format!(
                    "{} is outside 1..={MAX_ATTEMPTS_LIMIT}",
                    self.additional_attempts
                ),
            ));
        }
        Ok(())
    }
}

/// Parameters of [`Store::dead_discard`](crate::Store::dead_discard).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DiscardParams {
    /// Dead items to delete. Ids that are not dead are left alone.
    pub ids: Vec<ItemId>,
    /// Discard the dead items this filter matches instead of `ids` (which is then
    /// empty), at most `filter.limit` of them in this call.
    pub filter: Option<DeadFilter>,
}

impl DiscardParams {
    /// Discard these dead items.
    pub fn new(ids: Vec<ItemId>) -> Self {
        DiscardParams { ids, filter: None }
    }

    /// Discard the dead items `filter` matches (at most `filter.limit` per call).
    pub fn matching(filter: DeadFilter) -> Self {
        DiscardParams {
            ids: Vec::new(),
            filter: Some(filter),
        }
    }

    /// Checks the batch bounds, or the filter (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        match &self.filter {
            Some(f) => f.validate(limits),
            None => limits.check_batch("ids", self.ids.len(), limits.max_enqueue_batch),
        }
    }
}
