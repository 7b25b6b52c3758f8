//! The reference model: the contract, answered by scanning a vector.

use super::*;

/// The contract, answered by scanning a vector.
pub(super) struct Model {
    pub(super) keep_done: bool,
    /// Index = enqueue order; `None` once deleted.
    pub(super) items: Vec<Option<Item>>,
    pub(super) seq_of: HashMap<ItemId, usize>,
    pub(super) dedup: HashMap<(QueueName, DedupKey), (ItemId, Timestamp)>,
    /// Registration order.
    pub(super) instances: Vec<Instance>,
}

impl Model {
    pub(super) fn new(keep_done: bool) -> Self {
        Model {
            keep_done,
            items: Vec::new(),
            seq_of: HashMap::new(),
            dedup: HashMap::new(),
            instances: Vec::new(),
        }
    }

    pub(super) fn get(&self, id: ItemId) -> Option<&Item> {
        self.seq_of.get(&id).and_then(|&i| self.items[i].as_ref())
    }

    pub(super) fn get_mut(&mut self, id: ItemId) -> Option<&mut Item> {
        match self.seq_of.get(&id) {
            Some(&i) => self.items[i].as_mut(),
            None => None,
        }
    }

    pub(super) fn delete(&mut self, id: ItemId) {
        if let Some(&i) = self.seq_of.get(&id) {
            self.items[i] = None;
        }
    }

    pub(super) fn enqueue(&mut self, news: &[NewItem], now: Timestamp) -> Vec<Enqueued> {
        let mut out = Vec::new();
        for new in news {
            if let Some(k) = &new.dedup_key {
                let key = (new.queue.clone(), k.clone());
                if let Some(&(id, exp)) = self.dedup.get(&key) {
                    if exp > now {
                        out.push(Enqueued {
                            id,
                            duplicate: true,
                        });
                        continue;
                    }
                }
                self.dedup.insert(key, (new.id, now + new.dedup_window));
            }
            self.seq_of.insert(new.id, self.items.len());
            self.items.push(Some(machine::enqueue(new, now)));
            out.push(Enqueued {
                id: new.id,
                duplicate: false,
            });
        }
        out
    }

    pub(super) fn is_head(&self, seq: usize) -> bool {
        let Some(it) = &self.items[seq] else {
            return false;
        };
        let Some(s) = &it.stream else { return true };
        !self.items[..seq]
            .iter()
            .flatten()
            .any(|o| o.stream.as_ref() == Some(s) && machine::holds_stream(o))
    }

    pub(super) fn scope_busy(&self, scope: &ScopeKey) -> bool {
        self.items
            .iter()
            .flatten()
            .any(|o| o.scope.as_ref() == Some(scope) && o.state == ItemState::Running)
    }

    pub(super) fn claimable(&self, seq: usize, queues: &[QueueName], now: Timestamp) -> bool {
        let Some(it) = &self.items[seq] else {
            return false;
        };
        queues.contains(&it.queue)
            && machine::is_due(it, now)
            && self.is_head(seq)
            && it.scope.as_ref().is_none_or(|s| !self.scope_busy(s))
    }

    pub(super) fn claim(
        &mut self,
        queues: &[QueueName],
        owner: &OwnerId,
        limit: usize,
        lease: LeaseId,
        now: Timestamp,
    ) -> Vec<Item> {
        for it in self.items.iter_mut().flatten() {
            if queues.contains(&it.queue) {
                machine::recover(it, now);
            }
        }
        let mut out = Vec::new();
        while out.len() < limit {
            let best = (0..self.items.len())
                .filter(|&i| self.claimable(i, queues, now))
                .min_by_key(|&i| {
                    let it = self.items[i].as_ref().unwrap();
                    (it.priority, it.run_at, i)
                });
            let Some(i) = best else { break };
            let it = self.items[i].as_mut().unwrap();
            assert!(machine::claim(it, owner, lease, now, LEASE));
            out.push(it.clone());
        }
        out
    }

    pub(super) fn complete(&mut self, tokens: &[LeaseToken], now: Timestamp) -> Vec<TokenOutcome> {
        tokens
            .iter()
            .map(|t| {
                let Some(it) = self.get_mut(t.id) else {
                    return TokenOutcome::LeaseLost;
                };
                let out = machine::complete(it, t, now);
                if out == TokenOutcome::Accepted && !self.keep_done {
                    self.delete(t.id);
                }
                out
            })
            .collect()
    }

    pub(super) fn recover(&mut self, limit: usize, now: Timestamp) -> Recovered {
        let mut expired: Vec<(Timestamp, usize)> = self
            .items
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().map(|it| (i, it)))
            .filter(|(_, it)| machine::is_expired(it, now))
            .map(|(i, it)| (it.lease_expires_at.unwrap(), i))
            .collect();
        expired.sort();
        let mut r = Recovered::default();
        for (_, i) in expired.into_iter().take(limit) {
            match machine::recover(self.items[i].as_mut().unwrap(), now) {
                Some(Recovery::Requeued) => r.requeued += 1,
                Some(Recovery::Dead) => r.dead += 1,
                None => unreachable!(),
            }
        }
        r
    }

    pub(super) fn heartbeat(&mut self, owner: &OwnerId, now: Timestamp) {
        match self.instances.iter_mut().find(|i| i.id == *owner) {
            Some(i) => i.last_seen = now,
            None => self.instances.push(Instance {
                id: owner.clone(),
                started_at: now,
                last_seen: now,
            }),
        }
    }

    pub(super) fn evict(&mut self, now: Timestamp) -> Evicted {
        let mut ev = Evicted::default();
        let (stale, live): (Vec<Instance>, Vec<Instance>) = self
            .instances
            .drain(..)
            .partition(|i| i.last_seen + STALE_AFTER <= now);
        self.instances = live;
        for inst in stale {
            for it in self.items.iter_mut().flatten() {
                if it.state == ItemState::Running && it.owner.as_ref() == Some(&inst.id) {
                    machine::evict(it, now);
                    ev.released += 1;
                }
            }
            ev.instances.push(inst.id);
        }
        ev
    }

    pub(super) fn purge(&mut self, keep: Duration, limit: usize, now: Timestamp) -> (u64, u64) {
        let mut done: Vec<(Timestamp, usize)> = self
            .items
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().map(|it| (i, it)))
            .filter(|(_, it)| it.state == ItemState::Done && it.updated_at <= now - keep)
            .map(|(i, it)| (it.updated_at, i))
            .collect();
        done.sort();
        let mut items = 0;
        for (_, i) in done.into_iter().take(limit) {
            self.items[i] = None;
            items += 1;
        }
        let mut expired: Vec<_> = self
            .dedup
            .iter()
            .filter(|(_, (_, exp))| *exp <= now)
            .map(|((q, k), (_, exp))| (*exp, q.clone(), k.clone()))
            .collect();
        expired.sort();
        expired.truncate(limit);
        let keys = expired.len() as u64;
        for (_, q, k) in expired {
            let k = (q, k);
            self.dedup.remove(&k);
        }
        (items, keys)
    }

    pub(super) fn counts(&self, q: &QueueName, now: Timestamp) -> QueueCounts {
        let mut c = QueueCounts::default();
        let mut oldest: Option<Timestamp> = None;
        for it in self.items.iter().flatten().filter(|it| it.queue == *q) {
            match it.state {
                ItemState::Ready if it.run_at <= now => {
                    c.ready += 1;
                    oldest = Some(oldest.map_or(it.run_at, |o| o.min(it.run_at)));
                }
                ItemState::Ready => c.scheduled += 1,
                ItemState::Running => c.running += 1,
                ItemState::Dead => c.dead += 1,
                ItemState::Done => c.done += 1,
            }
        }
        c.with_oldest_ready_age(oldest.map(|at| now.duration_since(at)))
    }
}
