//! The `Store` impl of [`Flawed`]: each method applies the flaws that touch it.

use super::*;

#[async_trait]
impl Store for Flawed {
    fn name(&self) -> &'static str {
        "flawed-memory"
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn limits(&self) -> Limits {
        self.inner.limits()
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        self.inner.wake_signal()
    }

    async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
        if self.flaw.of_limits() {
            for item in &mut params.items {
                match self.flaw {
                    Flaw::FairSharesByLimitKey => {
                        if let Some(k) = &item.limit_key {
                            item.fairness_key = Some(FairnessKey::new(k.as_str())?);
                        }
                    }
                    Flaw::ANewTenantJoinsTheLongestLine => {
                        let mut h = self.hidden();
                        let seen = h
                            .tenants
                            .contains_key(&(item.queue.clone(), item.fairness_key.clone()));
                        let longest = h
                            .tenants
                            .iter()
                            .filter(|((q, _), _)| *q == item.queue)
                            .max_by_key(|(_, n)| **n)
                            .map(|((_, t), n)| (t.clone(), *n));
                        *h.tenants
                            .entry((item.queue.clone(), item.fairness_key.clone()))
                            .or_default() += 1;
                        if let (false, Some((t, n))) = (seen, longest) {
                            if n > 1 {
                                item.fairness_key = t;
                            }
                        }
                    }
                    _ => {}
                }
            }
            let out = self.inner.enqueue(params.clone()).await?;
            let mut h = self.hidden();
            for (item, told) in params.items.iter().zip(&out) {
                if let (Some(k), false) = (&item.limit_key, told.duplicate) {
                    h.limit_keys
                        .insert(item.id, (item.queue.clone(), k.clone()));
                    h.limit_order.push(item.id);
                }
            }
            return Ok(out);
        }
        for item in &mut params.items {
            if matches!(
                self.flaw,
                Flaw::FilteredDiscardLeavesTheStreamBlocked | Flaw::CancelLeavesAHoleInItsStream
            ) {
                if let Some(s) = &item.stream {
                    let mut hidden = self.hidden();
                    hidden
                        .stream_order
                        .entry(s.clone())
                        .or_default()
                        .push(item.id);
                }
            }
            if self.flaw == Flaw::DiscardForgetsDedupKeys {
                if let Some(k) = item.dedup_key.take() {
                    let mut hidden = self.hidden();
                    let generation = hidden
                        .key_generation
                        .get(&(item.queue.clone(), k.to_string()))
                        .copied()
                        .unwrap_or(0);
                    item.dedup_key = Some(if generation == 0 {
                        k.clone()
                    } else {
                        DedupKey::new(format!("{k}#{generation}"))?
                    });
                    hidden.dedup_keys.insert(item.id, k);
                }
            }
        }
        self.inner.enqueue(params).await
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        if self.flaw.of_limits() {
            return self.limit_claim(params).await;
        }
        let mut leases = self.inner.claim(params).await?;
        if matches!(
            self.flaw,
            Flaw::LeavesTheRunRunning | Flaw::StallsTheRunBehindItsHead
        ) {
            let mut hidden = self.hidden();
            for pair in leases.windows(2) {
                if pair[1].item.stream.is_some() && pair[1].item.stream == pair[0].item.stream {
                    hidden.tails.push(pair[1].clone());
                }
            }
        }
        if self.flaw == Flaw::FreesTheStreamBehindARunningHead {
            let mut hidden = self.hidden();
            for (j, l) in leases.iter().enumerate() {
                let same = |k: Option<usize>| {
                    k.and_then(|k| leases.get(k))
                        .is_some_and(|o| l.item.stream.is_some() && o.item.stream == l.item.stream)
                };
                if same(j.checked_sub(1)) || same(Some(j + 1)) {
                    hidden.runs.push(l.clone());
                }
            }
        }
        let held: Vec<LeaseToken> = {
            let hidden = self.hidden();
            leases
                .iter()
                .filter(|l| hidden.held_back.contains(&l.token.id))
                .map(|l| l.token)
                .collect()
        };
        if !held.is_empty() {
            self.inner.release(ReleaseParams::new(held.clone())).await?;
            leases.retain(|l| !held.contains(&l.token));
        }
        for lease in &mut leases {
            self.restore(&mut lease.item);
        }
        Ok(leases)
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        self.inner.renew(params).await
    }

    async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        if self.flaw.of_limits() {
            self.attempt_only(&mut params.tokens).await?;
            return self.inner.complete(params).await;
        }
        self.free_the_stream_behind(&params.tokens).await?;
        if matches!(
            self.flaw,
            Flaw::LeavesTheRunRunning | Flaw::FreesTheStreamBehindARunningHead
        ) {
            let mut out = Vec::new();
            for t in params.tokens {
                let kept = self.hidden().kept.remove(&t.id);
                match kept {
                    Some(l) if l.token == t => out.push(TokenOutcome::Accepted),
                    _ => out.extend(self.inner.complete(CompleteParams::new(vec![t])).await?),
                }
            }
            return Ok(out);
        }
        self.inner.complete(params).await
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        if self.flaw.of_limits() {
            let tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
            let out = self.inner.fail(params).await?;
            let refused: Vec<LeaseToken> = tokens
                .into_iter()
                .zip(&out)
                .filter(|(_, o)| **o == FailOutcome::LeaseLost)
                .map(|(t, _)| t)
                .collect();
            self.stale_frees(&refused).await?;
            return Ok(out);
        }
        let tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
        self.keep_tails_behind(&tokens).await?;
        self.inner.fail(params).await
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        if self.flaw.of_limits() {
            let tokens = params.tokens.clone();
            let out = self.inner.release(params).await?;
            let refused: Vec<LeaseToken> = tokens
                .into_iter()
                .zip(&out)
                .filter(|(_, o)| **o == TokenOutcome::LeaseLost)
                .map(|(t, _)| t)
                .collect();
            self.stale_frees(&refused).await?;
            return Ok(out);
        }
        self.keep_tails_behind(&params.tokens).await?;
        self.inner.release(params).await
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        let mut recovered = self.inner.recover_expired(params).await?;
        recovered.requeued += self.stall_put_back_tails().await?;
        Ok(recovered)
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        self.inner.purge(params).await
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        self.inner.dead_requeue(params).await
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        let candidates = self.discard_candidates(&params).await?;
        let by_filter = params.filter.is_some();
        let n = self.inner.dead_discard(params).await?;
        self.after_discard(candidates, by_filter).await?;
        Ok(n)
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        if let Some(l) = self.hidden().kept.get(&id) {
            return Ok(Some(l.item.clone()));
        }
        let mut item = self.inner.item_get(id).await?;
        if let Some(item) = &mut item {
            self.restore(item);
        }
        Ok(item)
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let c = self.inner.queue_counts(queue).await?;
        Ok(c)
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.inner.instance_heartbeat(params).await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.inner.instance_list().await
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        let mut evicted = self.inner.instance_evict_stale(params).await?;
        evicted.released += self.stall_put_back_tails().await?;
        Ok(evicted)
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.inner.instance_deregister(params).await
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        self.inner.leader_acquire(params).await
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        self.inner.leader_resign(params).await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        self.inner.leader_get(name).await
    }

    async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
        self.inner.item_list(params).await
    }

    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
        self.inner.lease_list(params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.inner.queue_list().await
    }

    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
        if self.flaw == Flaw::CancelLeavesAHoleInItsStream {
            // Which of the ids are ready items behind an unfinished earlier item of
            // their stream.
            let mut behind = Vec::new();
            for &id in &params.ids {
                let Some(it) = self.inner.item_get(id).await? else {
                    behind.push(None);
                    continue;
                };
                let Some(s) = it.stream.clone() else {
                    behind.push(None);
                    continue;
                };
                let order = self
                    .hidden()
                    .stream_order
                    .get(&s)
                    .cloned()
                    .unwrap_or_default();
                let mut earlier_unfinished = false;
                for &e in order.iter().take_while(|&&e| e != id) {
                    if self
                        .inner
                        .item_get(e)
                        .await?
                        .is_some_and(|i| i.state != ItemState::Done)
                    {
                        earlier_unfinished = true;
                    }
                }
                behind.push(earlier_unfinished.then_some(s));
            }
            let out = self.inner.item_cancel(params.clone()).await?;
            for ((o, s), &id) in out.iter().zip(behind).zip(&params.ids) {
                if let (CancelOutcome::Cancelled, Some(s)) = (o, s) {
                    self.hold_back_behind(&s, id);
                }
            }
            return Ok(out);
        }
        self.inner.item_cancel(params).await
    }

    async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
        self.inner.queue_pause(params).await
    }

    async fn queue_resume(&self, params: PauseParams) -> Result<bool> {
        self.inner.queue_resume(params).await
    }

    async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        if self.flaw.of_limits() {
            return self.limit_set(params).await;
        }
        self.inner.limits_set(params).await
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        if self.flaw.of_limits() {
            return self.limit_get(queue).await;
        }
        self.inner.limits_get(queue).await
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        self.hidden().configs.remove(queue);
        self.inner.limits_clear(queue).await
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.inner.limits_list().await
    }

    async fn limits_defer(&self, params: DeferParams) -> Result<()> {
        if self.flaw == Flaw::IgnoresDeferrals {
            return params.validate(&self.limits());
        }
        self.inner.limits_defer(params).await
    }
}
