use super::*;
use std::collections::HashSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_opens_of_one_file_never_hand_out_one_item_twice() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let a = open(&path, &c).await;
    let b = open(&path, &c).await;
    let items: Vec<NewItem> = (0..300u32)
        .map(|i| NewItem::new(q(), i.to_le_bytes().to_vec()))
        .collect();
    a.enqueue(EnqueueParams::new(items)).await.unwrap();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
    let mut tasks = Vec::new();
    for (n, store) in [a.clone(), a.clone(), b.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut mine = Vec::new();
            loop {
                let leases = store
                    .claim(ClaimParams::new(q(), me(n as u32), 7, LEASE))
                    .await
                    .unwrap();
                if leases.is_empty() {
                    return mine;
                }
                let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
                let outs = store
                    .complete(tenure_core::CompleteParams::new(tokens.clone()))
                    .await
                    .unwrap();
                assert!(outs
                    .iter()
                    .all(|o| *o == tenure_core::TokenOutcome::Accepted));
                mine.extend(tokens.into_iter().map(|t| t.id));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 300, "every item claimed and completed once");
    assert_eq!(unique.len(), 300, "no item handed out twice");
    assert_eq!(a.queue_counts(&q()).await.unwrap().pending(), 0);
}
