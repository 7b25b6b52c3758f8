//! The flaws that break G1, exclusive claim: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handing_one_item_to_two_claimers_fails_g01() {
    must_fail(
        broken::<HandsOneItemToTwoClaimers>(),
        "g01_exclusive_claim",
        "a_claimed_item_is_not_claimed_again_while_its_lease_is_live",
    )
    .await;
}

flaw! {
    /// Hands a still-running item to a second claimer (breaks G1).
    HandsOneItemToTwoClaimers { handed: Shared<Vec<Lease>> }
}

tenure_core::forward_store! {
    impl Store for HandsOneItemToTwoClaimers {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let limit = params.limit as usize;
            let owner = params.owner.clone();
            let mut leases = self.inner.claim(params).await?;
            let earlier = {
                let mut handed = lock(&self.handed);
                let earlier = handed.clone();
                handed.extend(leases.iter().cloned());
                let keep_from = handed.len().saturating_sub(64);
                handed.drain(..keep_from);
                earlier
            };
            let mine: HashSet<ItemId> = leases.iter().map(|l| l.token.id).collect();
            for mut lease in earlier.into_iter().rev() {
                if leases.len() >= limit {
                    break;
                }
                let current = self.inner.item_get(lease.token.id).await?;
                let live =
                    current.is_some_and(|i| i.state == ItemState::Running && i.token() == lease.token);
                if live && !mine.contains(&lease.token.id) && lease.owner != owner {
                    lease.owner = owner.clone();
                    lease.item.owner = Some(owner.clone());
                    leases.push(lease);
                }
            }
            Ok(leases)
        }
    }
}
