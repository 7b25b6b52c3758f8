//! LISTEN/NOTIFY wake-ups on a dedicated connection: a latency hint, never needed for
//! correctness.
//!
//! The listener runs on its own one-connection pool (so it never takes a connection
//! the store's calls need) in a background task that ends when the last store handle
//! is dropped. A lost connection is re-established with a backoff capped at 1 s; after every
//! reconnect the signal fires once, because notifications sent meanwhile are lost.
//!
//! The listener reports its state on the signal ([`WakeHealth`]): `Down` until the
//! first LISTEN is in place, `Healthy` while it is, `Down` from a lost connection until
//! LISTEN is in place again. Loss and recovery are logged at `warn` and `info`.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tenure_core::{WakeHealth, WakeSignal};
use tokio::task::JoinHandle;

/// The longest wait between two attempts to connect again: the listener is back
/// within about a second of the server (its wake-ups are a hint, and workers poll at
/// their base while it is down, but a relaxed worker relies on them).
const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Starts the listener task for `channel`.
pub(crate) fn spawn(
    options: PgConnectOptions,
    channel: String,
    wake: WakeSignal,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            // Short, so a server that is back is found soon: the pool retries a
            // refused connection within the timeout at up to a fifth of it.
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy_with(options);
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::debug!(error = %e, "tenure-postgres: LISTEN connection failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                    continue;
                }
            };
            if let Err(e) = listener.listen(&channel).await {
                tracing::debug!(error = %e, "tenure-postgres: LISTEN failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_MAX);
                continue;
            }
            // Anything sent before we listened is unknown: poll once.
            if wake.set_health(WakeHealth::Healthy) {
                tracing::info!(%channel, "tenure-postgres: LISTEN connection established");
            }
            wake.notify();
            backoff = Duration::from_millis(100);
            loop {
                match listener.try_recv().await {
                    Ok(Some(_)) => wake.notify(),
                    // The connection was lost and re-established (LISTEN included)
                    // within this call; notifications sent in between are gone.
                    Ok(None) => {
                        tracing::info!(
                            %channel,
                            "tenure-postgres: LISTEN connection lost and re-established"
                        );
                        wake.notify();
                    }
                    Err(e) => {
                        wake.set_health(WakeHealth::Down);
                        tracing::warn!(
                            error = %e,
                            %channel,
                            "tenure-postgres: LISTEN connection lost; reconnecting, and polling at the base meanwhile"
                        );
                        break;
                    }
                }
            }
            tokio::time::sleep(backoff).await;
        }
    })
}
