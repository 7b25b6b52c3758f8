//! Work over time (the contract's `History` group): the bodies of history_add and
//! history. Each runs its SQL (`ops/history.rs`) on the writer thread.

use tenure_core::async_trait;
use tenure_core::contract::{History, Valid};
use tenure_core::{HistoryAddParams, HistoryParams, HistoryPoint, Result};

use crate::{ops, SqliteStore};

#[async_trait]
impl History for SqliteStore {
    async fn history_add(&self, params: Valid<HistoryAddParams>) -> Result<()> {
        self.inner
            .writer
            .call(move |cx| ops::history_add(cx, &params))
            .await
    }

    async fn history(&self, params: Valid<HistoryParams>) -> Result<Vec<HistoryPoint>> {
        self.inner
            .writer
            .call(move |cx| ops::history(cx, &params))
            .await
    }
}
