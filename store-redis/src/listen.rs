//! Sharded pub/sub wake-ups on a dedicated connection: a latency hint, never needed
//! for correctness.
//!
//! Every enqueue that inserts publishes once on the prefix's shard channel
//! `{prefix}:wake` (`SPUBLISH`, from inside the enqueue function, so the message
//! follows the write). A shard channel hashes like a key, so on a Redis Cluster the
//! message stays on the shard that owns the prefix's slot instead of being broadcast
//! to every node; on one server and behind Sentinel it works the same way. The
//! listener runs in a background task that ends when the last store handle is
//! dropped: it finds the server to listen on (the server of the URL, the primary
//! the sentinels name, or the cluster primary owning the slot, asked again on every
//! reconnect, so it follows a failover), opens a RESP3 connection there and sends
//! `SSUBSCRIBE`. A lost connection, or the server dropping the subscription (as a
//! cluster node does when the slot moves away), is followed by a new subscription
//! after a capped backoff; after every (re)subscribe the signal fires once, because
//! messages sent meanwhile are lost.
//!
//! The listener reports its state on the signal ([`WakeHealth`]): `Down` until the
//! first subscription is in place, `Healthy` while it is, `Down` from a lost
//! connection until it is subscribed again. Loss and recovery are logged at `warn` and
//! `info`.

use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncConnectionConfig, PushInfo, PushKind};
use tenure_core::{WakeHealth, WakeSignal};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::connect::Target;

/// Starts the listener task for the shard channel `channel` of cluster slot `slot`.
pub(crate) fn spawn(
    target: Arc<Target>,
    channel: String,
    slot: u16,
    connect_timeout: Duration,
    wake: WakeSignal,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (tx, mut pushes) = mpsc::unbounded_channel::<PushInfo>();
            let subscribed = async {
                let client = target.pubsub_node(slot, connect_timeout).await?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(connect_timeout)
                    .set_response_timeout(connect_timeout)
                    .set_push_sender(tx);
                let mut conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                redis::cmd("SSUBSCRIBE")
                    .arg(&channel)
                    .exec_async(&mut conn)
                    .await?;
                Ok::<_, redis::RedisError>(conn)
            };
            // The connection is held while it listens: dropping it ends its driver.
            let _conn = match tokio::time::timeout(connect_timeout * 2, subscribed).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "tenure-redis: SSUBSCRIBE failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
                Err(_) => {
                    tracing::debug!("tenure-redis: SSUBSCRIBE timed out");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            // Anything published before we subscribed is unknown: poll once.
            if wake.set_health(WakeHealth::Healthy) {
                tracing::info!(%channel, "tenure-redis: SSUBSCRIBE connection established");
            }
            wake.notify();
            backoff = Duration::from_millis(100);
            while let Some(push) = pushes.recv().await {
                match push.kind {
                    PushKind::SMessage | PushKind::Message => wake.notify(),
                    // The server dropped the subscription (a cluster node whose
                    // slot moved away) or the connection is gone.
                    PushKind::SUnsubscribe | PushKind::Disconnection => break,
                    _ => {}
                }
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
