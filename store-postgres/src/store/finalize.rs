//! Finalize (the contract's second group): `Store::renew`, `Store::complete`,
//! `Store::fail` and `Store::release`, each one fenced statement over the batch.

use std::collections::{HashMap, HashSet};
use tenure_core::async_trait;
use tenure_core::contract::{Finalize, Valid};

use sqlx::{PgConnection, Row};
use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ItemState, ReleaseParams, RenewOutcome, RenewParams,
    Result, Retry, Timestamp, TokenOutcome,
};
use uuid::Uuid;

use crate::error::map;
use crate::rows::u32_of;

use super::PgStore;

#[async_trait]
impl Finalize for PgStore {
    /// `Store::renew`.
    async fn renew(&self, params: Valid<RenewParams>) -> Result<Vec<RenewOutcome>> {
        let now = self.inner.clock.now();
        let expires = now + params.lease_for;
        let (ids, attempts, leases) = token_arrays(params.tokens.iter());
        // Progress rides on the renewal's own statement; without any, the statement
        // is the one a renewal always ran.
        let progress: Option<Vec<Option<String>>> =
            params.progress.iter().any(Option::is_some).then(|| {
                params
                    .tokens
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        params
                            .progress_at(i)
                            .map(|p| p.clone().for_attempt(t.attempt).encode())
                    })
                    .collect()
            });
        let statement = match progress {
            Some(_) => &self.inner.sql.renew_progress,
            None => &self.inner.sql.renew,
        };
        let mut query = self
            .query(statement)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(expires.as_micros())
            .bind(&leases);
        if let Some(progress) = &progress {
            query = query.bind(progress);
        }
        let rows = self.fetch_all(query).await?;
        let mut by_id: HashMap<Uuid, RenewOutcome> = HashMap::with_capacity(rows.len());
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let max: i32 = r.try_get(1).map_err(map)?;
            let renewals: Option<i32> = r.try_get(2).map_err(map)?;
            let outcome = match renewals {
                Some(n) => RenewOutcome::Renewed {
                    expires_at: expires,
                    renewals: u32_of("renewals", n)?,
                },
                None => RenewOutcome::LimitReached {
                    limit: u32_of("max_renewals", max)?,
                },
            };
            by_id.insert(id, outcome);
        }
        Ok(params
            .tokens
            .iter()
            .map(|t| {
                by_id
                    .remove(t.id.as_uuid())
                    .unwrap_or(RenewOutcome::LeaseLost)
            })
            .collect())
    }

    /// `Store::complete`.
    async fn complete(&self, params: Valid<CompleteParams>) -> Result<Vec<TokenOutcome>> {
        let mut s = self.session().await?;
        let out = self.complete_on(&mut s, &params).await?;
        s.finish().await?;
        self.slots_freed(params.tokens.iter().map(|t| t.id.as_uuid()));
        Ok(out)
    }

    /// `Store::fail`.
    async fn fail(&self, params: Valid<FailParams>) -> Result<Vec<FailOutcome>> {
        let mut s = self.session().await?;
        let out = self.fail_on(&mut s, &params).await?;
        s.finish().await?;
        self.slots_freed(params.failures.iter().map(|f| f.token.id.as_uuid()));
        Ok(out)
    }

    /// `Store::release`.
    async fn release(&self, params: Valid<ReleaseParams>) -> Result<Vec<TokenOutcome>> {
        let mut s = self.session().await?;
        let out = self.release_on(&mut s, &params).await?;
        s.finish().await?;
        self.slots_freed(params.tokens.iter().map(|t| t.id.as_uuid()));
        Ok(out)
    }
}

impl PgStore {
    // The fenced finalizes on one connection: the whole of `complete`, `fail` and
    // `release` once a connection is at hand, shared by the store's own calls (on a
    // session of their own) and the `_in_tx` calls (on the caller's transaction).

    /// `Store::complete` on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn complete_on(
        &self,
        conn: &mut PgConnection,
        params: &CompleteParams,
    ) -> Result<Vec<TokenOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts, leases) = token_arrays(params.tokens.iter());
        let rows = self
            .query(&self.inner.sql.complete)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(self.inner.keep_done)
            .bind(&leases)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut accepted: HashSet<Uuid> = HashSet::with_capacity(rows.len());
        for r in rows {
            accepted.insert(r.try_get(0).map_err(map)?);
        }
        // A token refused though still current was refused for the stream's order
        // (G9); only read when some token was refused.
        let mut behind: HashSet<Uuid> = HashSet::new();
        if accepted.len() < ids.len() {
            let rows = self
                .query(&self.inner.sql.still_current)
                .bind(&ids)
                .bind(&attempts)
                .bind(&leases)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?;
            for r in rows {
                behind.insert(r.try_get(0).map_err(map)?);
            }
        }
        Ok(ids
            .iter()
            .map(|id| {
                if accepted.contains(id) {
                    TokenOutcome::Accepted
                } else if behind.contains(id) {
                    TokenOutcome::OutOfOrder
                } else {
                    TokenOutcome::LeaseLost
                }
            })
            .collect())
    }

    /// `Store::fail` on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn fail_on(
        &self,
        conn: &mut PgConnection,
        params: &FailParams,
    ) -> Result<Vec<FailOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts, leases) = token_arrays(params.failures.iter().map(|f| &f.token));
        let retry_at: Vec<Option<i64>> = params
            .failures
            .iter()
            .map(|f| match f.retry {
                Retry::After(d) => Some((now + d).as_micros()),
                Retry::Never => None,
            })
            .collect();
        let errors: Vec<&str> = params.failures.iter().map(|f| f.error.as_str()).collect();
        let rows = self
            .query(&self.inner.sql.fail)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(&retry_at)
            .bind(&errors)
            .bind(&leases)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut by_id: HashMap<Uuid, FailOutcome> = HashMap::with_capacity(rows.len());
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let state: String = r.try_get(1).map_err(map)?;
            let run_at: i64 = r.try_get(2).map_err(map)?;
            let outcome = if state == ItemState::Ready.as_str() {
                FailOutcome::Retrying {
                    run_at: Timestamp::from_micros(run_at),
                }
            } else {
                FailOutcome::Dead
            };
            by_id.insert(id, outcome);
        }
        Ok(ids
            .iter()
            .map(|id| by_id.remove(id).unwrap_or(FailOutcome::LeaseLost))
            .collect())
    }

    /// `Store::release` on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn release_on(
        &self,
        conn: &mut PgConnection,
        params: &ReleaseParams,
    ) -> Result<Vec<TokenOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts, leases) = token_arrays(params.tokens.iter());
        let rows = self
            .query(&self.inner.sql.release)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(&leases)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut done: HashSet<Uuid> = HashSet::with_capacity(rows.len());
        for r in rows {
            done.insert(r.try_get(0).map_err(map)?);
        }
        Ok(ids
            .iter()
            .map(|id| {
                if done.contains(id) {
                    TokenOutcome::Accepted
                } else {
                    TokenOutcome::LeaseLost
                }
            })
            .collect())
    }

    /// Finishes rows with their streams in one transaction: `sql` deletes them and
    /// answers each one's id and, for a stream head, its stream; then the promote of
    /// those streams, in statements of its own (G9).
    pub(super) async fn finish_with_streams(
        &self,
        sql: &str,
        now: Timestamp,
        ids: &[Uuid],
        attempts: Option<&[i32]>,
    ) -> Result<Vec<Uuid>> {
        let mut tx = self.begin().await?;
        let mut q = self.query(sql).bind(now.as_micros()).bind(ids);
        if let Some(a) = attempts {
            q = q.bind(a);
        }
        let rows = q.fetch_all(&mut *tx).await.map_err(map)?;
        let mut done = Vec::with_capacity(rows.len());
        let mut streams: Vec<String> = Vec::new();
        for r in &rows {
            done.push(r.try_get::<Uuid, _>(0).map_err(map)?);
            if let Some(s) = r.try_get::<Option<String>, _>(1).map_err(map)? {
                streams.push(s);
            }
        }
        if !streams.is_empty() {
            streams.sort();
            streams.dedup();
            self.query(&self.inner.sql.promote)
                .bind(&streams)
                .execute(&mut *tx)
                .await
                .map_err(map)?;
        }
        tx.commit().await.map_err(map)?;
        Ok(done)
    }
}

fn token_arrays<'a>(
    tokens: impl Iterator<Item = &'a tenure_core::LeaseToken>,
) -> (Vec<Uuid>, Vec<i32>, Vec<i64>) {
    let mut ids = Vec::new();
    let mut attempts = Vec::new();
    let mut leases = Vec::new();
    for t in tokens {
        ids.push(*t.id.as_uuid());
        // An attempt beyond i32 cannot exist in the table: it will answer lease lost.
        attempts.push(i32::try_from(t.attempt).unwrap_or(-1));
        leases.push(t.lease.to_i64());
    }
    (ids, attempts, leases)
}
