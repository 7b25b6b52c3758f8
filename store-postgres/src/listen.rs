//! LISTEN/NOTIFY wake-ups on a dedicated connection: a latency hint, never needed for
//! correctness.
//!
//! The listener runs on its own one-connection pool (so it never takes a connection
//! the store's calls need) in a background task that ends when the last store handle
//! is dropped. A lost connection is re-established with a capped backoff; after every
//! reconnect the signal fires once, because notifications sent meanwhile are lost.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tenure_core::WakeSignal;
use tokio::task::JoinHandle;

/// Starts the listener task for `channel`.
pub(crate) fn spawn(
    options: PgConnectOptions,
    channel: String,
    wake: WakeSignal,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options);
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::debug!(error = %e, "tenure-postgres: LISTEN connection failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            if let Err(e) = listener.listen(&channel).await {
                tracing::debug!(error = %e, "tenure-postgres: LISTEN failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
            // Anything sent before we listened is unknown: poll once.
            wake.notify();
            backoff = Duration::from_millis(100);
            loop {
                match listener.try_recv().await {
                    Ok(Some(_)) => wake.notify(),
                    // The connection was lost and re-established; notifications sent
                    // in between are gone.
                    Ok(None) => wake.notify(),
                    Err(e) => {
                        tracing::debug!(error = %e, "tenure-postgres: LISTEN connection lost");
                        break;
                    }
                }
            }
            tokio::time::sleep(backoff).await;
        }
    })
}
