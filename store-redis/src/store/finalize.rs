//! Finalize (the contract's second group): `Store::renew`, `Store::complete`,
//! `Store::fail` and `Store::release`, each one library function over the batch,
//! fenced on `(id, attempt, lease)`.

use tenure_core::async_trait;
use tenure_core::contract::{Finalize, Valid};
use tenure_core::{
    duration_micros, CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome,
    RenewParams, Result, Retry, Timestamp, TokenOutcome,
};

use crate::error::bad_reply;
use crate::scripts::SCRIPTS;

use super::{id_arg, lease_arg, u32_of, RedisStore};

fn token_outcomes(answers: Vec<i64>) -> Vec<TokenOutcome> {
    answers
        .into_iter()
        .map(|a| {
            if a == 1 {
                TokenOutcome::Accepted
            } else {
                TokenOutcome::LeaseLost
            }
        })
        .collect()
}

#[async_trait]
impl Finalize for RedisStore {
    /// `Store::renew`.
    async fn renew(&self, params: Valid<RenewParams>) -> Result<Vec<RenewOutcome>> {
        let mut inv = self.call(&SCRIPTS.renew);
        inv.arg(self.now()).arg(duration_micros(params.lease_for));
        if params.progress.iter().any(Option::is_some) {
            // Progress rides on the renewal's own call (stride 4).
            inv.arg(4);
            for (i, t) in params.tokens.iter().enumerate() {
                Self::tokens(&mut inv, std::slice::from_ref(t));
                let progress = params.progress_at(i);
                inv.arg(
                    progress.map_or(String::new(), |p| p.clone().for_attempt(t.attempt).encode()),
                );
            }
        } else {
            inv.arg(3);
            Self::tokens(&mut inv, &params.tokens);
        }
        let answers: Vec<Vec<i64>> = self.write(&inv).await?;
        answers
            .into_iter()
            .map(|a| match a.as_slice() {
                [1, expires, renewals] => Ok(RenewOutcome::Renewed {
                    expires_at: Timestamp::from_micros(*expires),
                    renewals: u32_of(*renewals)?,
                }),
                [2, limit] => Ok(RenewOutcome::LimitReached {
                    limit: u32_of(*limit)?,
                }),
                [0] => Ok(RenewOutcome::LeaseLost),
                other => Err(bad_reply(format!("renew answered {other:?}"))),
            })
            .collect()
    }

    /// `Store::complete`.
    async fn complete(&self, params: Valid<CompleteParams>) -> Result<Vec<TokenOutcome>> {
        let mut inv = self.call(&SCRIPTS.complete);
        inv.arg(self.now())
            .arg(if self.inner.keep_done { "1" } else { "0" });
        Self::tokens(&mut inv, &params.tokens);
        let answers: Vec<i64> = self.write(&inv).await?;
        self.slot_freed();
        Ok(answers
            .into_iter()
            .map(|a| match a {
                1 => TokenOutcome::Accepted,
                2 => TokenOutcome::OutOfOrder,
                _ => TokenOutcome::LeaseLost,
            })
            .collect())
    }

    /// `Store::fail`.
    async fn fail(&self, params: Valid<FailParams>) -> Result<Vec<FailOutcome>> {
        let mut inv = self.call(&SCRIPTS.fail);
        inv.arg(self.now());
        for f in &params.failures {
            let delay = match f.retry {
                Retry::After(d) => duration_micros(d),
                Retry::Never => -1,
            };
            id_arg(&mut inv, f.token.id).arg(f.token.attempt);
            lease_arg(&mut inv, f.token.lease).arg(delay);
        }
        for f in &params.failures {
            inv.arg(f.error.as_str());
        }
        let answers: Vec<Vec<i64>> = self.write(&inv).await?;
        self.slot_freed();
        answers
            .into_iter()
            .map(|a| match a.as_slice() {
                [1, run_at] => Ok(FailOutcome::Retrying {
                    run_at: Timestamp::from_micros(*run_at),
                }),
                [2] => Ok(FailOutcome::Dead),
                [0] => Ok(FailOutcome::LeaseLost),
                other => Err(bad_reply(format!("fail answered {other:?}"))),
            })
            .collect()
    }

    /// `Store::release`.
    async fn release(&self, params: Valid<ReleaseParams>) -> Result<Vec<TokenOutcome>> {
        let mut inv = self.call(&SCRIPTS.release);
        inv.arg(self.now());
        Self::tokens(&mut inv, &params.tokens);
        let answers: Vec<i64> = self.write(&inv).await?;
        self.slot_freed();
        Ok(token_outcomes(answers))
    }
}
