//! Pub/sub wake-ups on a dedicated connection: a latency hint, never needed for
//! correctness.
//!
//! Every enqueue that inserts publishes once on the prefix's channel `{prefix}:wake`
//! (from inside the enqueue script, so the message follows the write). The listener
//! runs in a background task that ends when the last store handle is dropped. A lost
//! connection is re-established with a capped backoff; after every (re)subscribe the
//! signal fires once, because messages sent meanwhile are lost.
//!
//! The listener reports its state on the signal ([`WakeHealth`]): `Down` until the
//! first subscription is in place, `Healthy` while it is, `Down` from a lost
//! connection until it is subscribed again. Loss and recovery are logged at `warn` and
//! `info`.

use std::time::Duration;

use futures_util::StreamExt;
use redis::Client;
use tenure_core::{WakeHealth, WakeSignal};
use tokio::task::JoinHandle;

/// Starts the listener task for `channel`.
pub(crate) fn spawn(
    client: Client,
    channel: String,
    connect_timeout: Duration,
    wake: WakeSignal,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let subscribed = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(&channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            let mut pubsub = match tokio::time::timeout(connect_timeout, subscribed).await {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "tenure-redis: SUBSCRIBE failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
                Err(_) => {
                    tracing::debug!("tenure-redis: SUBSCRIBE timed out");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            // Anything published before we subscribed is unknown: poll once.
            if wake.set_health(WakeHealth::Healthy) {
                tracing::info!(%channel, "tenure-redis: SUBSCRIBE connection established");
            }
            wake.notify();
            backoff = Duration::from_millis(100);
            let mut messages = pubsub.on_message();
            while messages.next().await.is_some() {
                wake.notify();
            }
            wake.set_health(WakeHealth::Down);
            tracing::warn!(
                %channel,
                "tenure-redis: pub/sub connection lost; reconnecting, and polling at the base meanwhile"
            );
            tokio::time::sleep(backoff).await;
        }
    })
}
