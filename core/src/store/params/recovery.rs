//! Params of the [`Recovery`](crate::contract::Recovery) group: recovery and purge.

use std::time::Duration;

use crate::error::Result;

use super::Limits;

/// Parameters of [`Store::recover_expired`](crate::Store::recover_expired).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecoverParams {
    /// Most expired items to handle in one pass.
    pub limit: u32,
}

impl RecoverParams {
    /// Recover up to `limit` expired leases.
    pub fn new(limit: u32) -> Self {
        RecoverParams { limit }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        limits.check_batch("limit", limit, limits.max_enqueue_batch)
    }
}

impl Default for RecoverParams {
    fn default() -> Self {
        RecoverParams::new(1_000)
    }
}

/// Parameters of [`Store::purge`](crate::Store::purge).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PurgeParams {
    /// Finished items older than this (by their last change) are deleted.
    pub keep_done_for: Duration,
    /// Most rows of each kind to delete in one pass.
    pub limit: u32,
}

impl PurgeParams {
    /// Delete finished items older than `keep_done_for` and expired dedup keys.
    pub fn new(keep_done_for: Duration, limit: u32) -> Self {
        PurgeParams {
            keep_done_for,
            limit,
        }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        limits.check_batch("limit", limit, limits.max_enqueue_batch)
    }
}
