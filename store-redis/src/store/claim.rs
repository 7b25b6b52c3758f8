//! Enqueue and claim (the contract's first group): `Store::enqueue` and
//! `Store::claim`, each one library function (`scripts/enqueue.lua`,
//! `scripts/claim.lua`).

use redis::Value;
use tenure_core::async_trait;
use tenure_core::contract::{Claims, Valid};
use tenure_core::machine;
use tenure_core::partition::key_hash;
use tenure_core::{
    duration_micros, ClaimParams, EnqueueParams, Enqueued, Error, Lease, LeaseId, Result,
};

use crate::error::bad_reply;
use crate::rows;
use crate::scripts::SCRIPTS;

use super::{id_arg, lease_arg, micros, RedisStore};

#[async_trait]
impl Claims for RedisStore {
    /// `Store::enqueue`.
    async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>> {
        let now = self.inner.clock.now();
        params.validate_schedule(&self.inner.limits, now)?;
        let mut inv = self.call(&SCRIPTS.enqueue);
        inv.arg(micros(now)).arg(params.items.len());
        for it in &params.items {
            id_arg(&mut inv, it.id)
                .arg(it.queue.as_str())
                .arg(it.payload.as_slice())
                .arg(it.stream.as_ref().map_or("", |s| s.as_str()))
                .arg(it.scope.as_ref().map_or("", |s| s.as_str()))
                .arg(it.dedup_key.as_ref().map_or("", |s| s.as_str()))
                .arg(duration_micros(it.dedup_window))
                .arg(it.priority)
                .arg(micros(it.schedule.run_at(now)))
                .arg(it.max_attempts)
                .arg(it.max_stalls)
                .arg(it.max_renewals);
            // The partition hash (G14) as two 32-bit halves: Lua numbers are doubles.
            let hash = key_hash(it.stream.as_ref(), it.id).unsigned_abs();
            inv.arg(hash >> 32).arg(hash & 0xffff_ffff);
            // G16, G17: the limit key ('' for none).
            inv.arg(it.limit_key.as_ref().map_or("", |k| k.as_str()));
            // G18: the fairness key ('' for none) and the declared weight.
            inv.arg(it.fairness_key.as_ref().map_or("", |k| k.as_str()))
                .arg(it.weight);
        }
        // G14: the instance a pinned enqueue pins new streams to, after the items.
        inv.arg(params.pin_to.as_ref().map_or("", |o| o.as_str()));
        let answers: Vec<(String, i64)> = match self.write(&inv).await {
            Err(e) if e.kind() == tenure_core::ErrorKind::NotFound => {
                let who = params.pin_to.as_ref().map_or("", |o| o.as_str());
                return Err(Error::not_found("instance", who));
            }
            other => other?,
        };
        if answers.len() != params.items.len() {
            return Err(bad_reply("enqueue answered a different number of items"));
        }
        let out = answers
            .into_iter()
            .map(|(id, dup)| {
                Ok(Enqueued {
                    id: rows::id_of(&id)?,
                    duplicate: dup == 1,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.inner.wake.notify();
        Ok(out)
    }

    /// `Store::claim`.
    async fn claim(&self, params: Valid<ClaimParams>) -> Result<Vec<Lease>> {
        let now = self.inner.clock.now();
        let expires_at = now + params.lease_for;
        let mut inv = self.call(&SCRIPTS.claim);
        inv.arg(micros(now))
            .arg(params.owner.as_str())
            .arg(params.limit)
            .arg(micros(expires_at))
            .arg(params.partitioning.map_or(0, |p| p.partitions))
            .arg(params.queues.len());
        for q in &params.queues {
            inv.arg(q.as_str());
        }
        // G9: the most items of one stream run. G3: one lease id for the leases of this
        // claim (it only has to differ between the leases of one item: `LeaseId`).
        inv.arg(params.stream_run);
        let lease = LeaseId::mint();
        lease_arg(&mut inv, lease);
        let answer: Value = match self.write(&inv).await {
            Err(e) if e.kind() == tenure_core::ErrorKind::NotFound => {
                return Err(Error::not_found("instance", params.owner.to_string()))
            }
            other => other?,
        };
        let Value::Array(answers) = answer else {
            return Err(bad_reply("claim did not answer an array"));
        };
        // The function answers each item as it was before the claim; the claim's
        // changes are exactly those of `machine::claim`, applied here. An item the
        // function took was in `ready`, so it was due on the server: an enqueue that
        // read a later clock (another process's, or this one's on another connection)
        // and reached the server first put it there with a `run_at` after this claim's
        // `now`. The server's order stands, so the transition is applied as of `now`
        // with `run_at` kept; refusing the answer would leave the items leased to
        // nobody until their leases expired.
        rows::claimed_items(answers, &params.queues)?
            .into_iter()
            .map(|mut item| {
                let run_at = item.run_at;
                item.run_at = run_at.min(now);
                let claimed =
                    machine::claim(&mut item, &params.owner, lease, now, params.lease_for);
                item.run_at = run_at;
                if !claimed || item.lease_expires_at != Some(expires_at) {
                    return Err(bad_reply(format!(
                        "claim answered item {} that was not claimable",
                        item.id
                    )));
                }
                Lease::from_item(item)
            })
            .collect()
    }
}
