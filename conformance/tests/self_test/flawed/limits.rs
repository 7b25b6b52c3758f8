//! The flaws of queue limits (G16, G17, G18).

use super::*;

impl Flawed {
    /// What the inner store is given for `limits`, with this flaw applied.
    pub(crate) fn inner_limits(&self, limits: &QueueLimits) -> QueueLimits {
        let mut l = limits.clone();
        match self.flaw {
            Flaw::IgnoresKeyOverrides => l.key_overrides.clear(),
            Flaw::IgnoresQueueConcurrency => l.concurrency = None,
            Flaw::IgnoresQueueRate => l.rate = None,
            Flaw::IgnoresConfiguredWeights => l.weights.clear(),
            Flaw::KeyRateCountsTheWholeQueue => {
                if let Some(r) = l.key_rate.take() {
                    l.rate = Some(r);
                }
            }
            _ => {}
        }
        l
    }

    pub(crate) async fn limit_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        if self.flaw == Flaw::ClampsBadLimits && params.validate(&self.limits()).is_err() {
            let mut l = params.limits.clone();
            let clamp = |n: u32| n.clamp(1, MAX_CONCURRENCY);
            l.concurrency = l.concurrency.map(clamp);
            l.key_concurrency = l.key_concurrency.map(clamp);
            for n in l.key_overrides.values_mut() {
                *n = clamp(*n);
            }
            for r in l.rate.iter_mut().chain(l.key_rate.iter_mut()) {
                *r = Rate::new(r.starts.max(1), r.per.max(Duration::from_secs(1)));
            }
            return self
                .inner
                .limits_set(LimitsParams::new(params.queue, l))
                .await;
        }
        params.validate(&self.limits())?;
        let before = self.hidden().configs.get(&params.queue).cloned();
        if self.flaw == Flaw::IgnoresLimitChanges && before.is_some() {
            return Ok(before);
        }
        self.hidden()
            .configs
            .insert(params.queue.clone(), params.limits.clone());
        let inner = self.inner_limits(&params.limits);
        self.inner
            .limits_set(LimitsParams::new(params.queue, inner))
            .await?;
        Ok(before)
    }

    pub(crate) async fn limit_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let shown = self.hidden().configs.get(queue).cloned();
        match shown {
            Some(l) if self.flaw != Flaw::ClampsBadLimits => Ok(Some(l)),
            _ => self.inner.limits_get(queue).await,
        }
    }

    /// A claim with one of the limit flaws.
    pub(crate) async fn limit_claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        let now = self.clock.now();
        let config = params.queues.iter().find_map(|q| {
            self.hidden()
                .configs
                .get(q)
                .cloned()
                .map(|c| (q.clone(), c))
        });
        match (self.flaw, &config) {
            (Flaw::FreesTheSlotAtHalfTheLease, Some(_)) => {
                let old: Vec<Lease> = {
                    let mut h = self.hidden();
                    let (old, young): (Vec<_>, Vec<_>) =
                        h.keyed_leases.drain(..).partition(|(l, at)| {
                            (now.as_micros() - at.as_micros()) * 2
                                >= l.expires_at.as_micros() - at.as_micros()
                        });
                    h.keyed_leases = young;
                    old.into_iter().map(|(l, _)| l).collect()
                };
                for l in old {
                    self.inner
                        .release(ReleaseParams::new(vec![l.token]))
                        .await?;
                }
            }
            (Flaw::RatesInFixedWindows, Some((q, c))) => {
                if let Some(per) = c.key_rate.map(|r| r.per) {
                    let window = (now.as_micros() / per.as_micros() as i64) as u64;
                    let last = self.hidden().windows.insert(q.clone(), window);
                    if last.is_some_and(|w| w != window) {
                        self.inner.limits_clear(q).await?;
                        self.inner
                            .limits_set(LimitsParams::new(q.clone(), self.inner_limits(c)))
                            .await?;
                    }
                }
            }
            (Flaw::ConcurrentClaimsShareOneCount, Some((q, c))) => {
                self.hidden().claims_in_flight += 1;
                tokio::task::yield_now().await;
                let overlapping = self.hidden().claims_in_flight > 1;
                if overlapping {
                    // The counts this claim read did not see the other claim's.
                    let mut raised = c.clone();
                    raised.key_concurrency = raised.key_concurrency.map(|n| n * 8);
                    self.inner
                        .limits_set(LimitsParams::new(q.clone(), raised))
                        .await?;
                }
                let out = self.inner.claim(params).await;
                if overlapping {
                    self.inner
                        .limits_set(LimitsParams::new(q.clone(), c.clone()))
                        .await?;
                }
                self.hidden().claims_in_flight -= 1;
                return out;
            }
            _ => {}
        }
        let small = params.limit <= 2;
        let leases = self.inner.claim(params).await?;
        {
            let mut h = self.hidden();
            for l in &leases {
                if h.limit_keys.contains_key(&l.token.id) {
                    h.keyed_leases.push((l.clone(), now));
                }
            }
        }
        if self.flaw == Flaw::WaitsBehindASaturatedKey && small && config.is_some() {
            // Blocked: an earlier keyed item of another key still waits.
            let (order, keys) = {
                let h = self.hidden();
                (h.limit_order.clone(), h.limit_keys.clone())
            };
            for l in &leases {
                let mine = keys.get(&l.token.id).map(|(_, k)| k.clone());
                let pos = order.iter().position(|id| *id == l.token.id);
                let before: Vec<ItemId> = match pos {
                    Some(p) => order[..p].to_vec(),
                    None => order.clone(),
                };
                for id in before {
                    let other = keys.get(&id).map(|(_, k)| k.clone());
                    if other == mine {
                        continue;
                    }
                    let waiting = self
                        .inner
                        .item_get(id)
                        .await?
                        .is_some_and(|i| i.state == ItemState::Ready && i.run_at <= now);
                    if waiting {
                        let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                        self.inner.release(ReleaseParams::new(tokens)).await?;
                        return Ok(Vec::new());
                    }
                }
            }
        }
        Ok(leases)
    }

    /// With [`Flaw::FencesLimitedItemsOnTheAttemptOnly`], keyed tokens rewritten to
    /// the items' current lease of the same attempt.
    pub(crate) async fn attempt_only(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::FencesLimitedItemsOnTheAttemptOnly {
            return Ok(());
        }
        for t in tokens {
            if !self.hidden().limit_keys.contains_key(&t.id) {
                continue;
            }
            if let Some(item) = self.inner.item_get(t.id).await? {
                if item.state == ItemState::Running && item.attempt == t.attempt {
                    *t = item.token();
                }
            }
        }
        Ok(())
    }

    /// With [`Flaw::StaleFinishFreesASlot`], a slot given for each refused keyed token:
    /// the key's limit raised by one.
    pub(crate) async fn stale_frees(&self, refused: &[LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::StaleFinishFreesASlot {
            return Ok(());
        }
        for t in refused {
            let keyed = self.hidden().limit_keys.get(&t.id).cloned();
            let Some((q, k)) = keyed else { continue };
            let Some(mut c) = self.inner.limits_get(&q).await? else {
                continue;
            };
            let n = c.key_limit(&k).unwrap_or(MAX_CONCURRENCY - 1) + 1;
            c.key_overrides.insert(k, n);
            self.inner.limits_set(LimitsParams::new(q, c)).await?;
        }
        Ok(())
    }
}
