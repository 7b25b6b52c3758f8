//! Whole-prefix housekeeping for tools that give a run a prefix of its own (the
//! `tenure bench` command, test harnesses): whether a prefix holds any key, and
//! removing every key of one. Neither is part of the [`Store`](tenure_core::Store)
//! contract, and neither is atomic with concurrent writers on the same prefix.

use redis::{Cmd, FromRedisValue};
use tenure_core::Result;

use super::RedisStore;
use crate::error::map;

/// Keys asked for per `SCAN` step.
const SCAN_COUNT: usize = 1_000;

impl RedisStore {
    /// Sends one plain command (no function call), forgetting the connection when it
    /// broke, as every store call does.
    async fn plain<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let (generation, mut conn) = self.connection().await?;
        conn.query(cmd, self.inner.slot).await.map_err(|e| {
            self.failed(generation, &e);
            map(e)
        })
    }

    /// The `SCAN` pattern of every key of this prefix: `{<prefix>}` and
    /// `{<prefix>}:...`. A validated prefix holds no glob character, and the closing
    /// brace keeps `{jobs}` from matching `{jobs2}...`.
    fn key_pattern(&self) -> String {
        format!("{}*", self.inner.root)
    }

    /// One `SCAN` step over the prefix's keys from `cursor`: the next cursor (0 when
    /// the walk is over) and the keys found.
    async fn scan_page(&self, cursor: u64) -> Result<(u64, Vec<String>)> {
        self.plain(
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(self.key_pattern())
                .arg("COUNT")
                .arg(SCAN_COUNT),
        )
        .await
    }

    /// Whether any key of this store's prefix exists on the server: `false` for a
    /// prefix nothing has written to yet. A tool that must not touch existing data
    /// checks it before its first write. Costs a `SCAN` of the server's keyspace (it
    /// stops at the first key found).
    pub async fn prefix_in_use(&self) -> Result<bool> {
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_page(cursor).await?;
            if !keys.is_empty() {
                return Ok(true);
            }
            if next == 0 {
                return Ok(false);
            }
            cursor = next;
        }
    }

    /// Deletes every key of this store's prefix (`SCAN` and `UNLINK`) and answers how
    /// many were removed: items, indexes, dedup keys, instances and leader leases
    /// alike. The function library is shared by every prefix on the server and stays.
    /// Meant for a prefix a tool made for itself; writers still using the prefix may
    /// leave keys behind.
    pub async fn remove_prefix(&self) -> Result<u64> {
        let (mut cursor, mut removed) = (0, 0);
        loop {
            let (next, keys) = self.scan_page(cursor).await?;
            if !keys.is_empty() {
                let n: u64 = self.plain(redis::cmd("UNLINK").arg(&keys)).await?;
                removed += n;
            }
            if next == 0 {
                return Ok(removed);
            }
            cursor = next;
        }
    }
}
