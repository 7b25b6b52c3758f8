//! Decoding rows into core types. A value the core would reject is a corrupt row:
//! [`Error::Internal`](tenure_core::Error).

use sqlx::postgres::PgRow;
use sqlx::Row;
use tenure_core::{
    DedupKey, Error, Item, ItemId, ItemState, LeaseId, OwnerId, Progress, QueueName, Result,
    ScopeKey, StreamKey, Timestamp,
};
use uuid::Uuid;

use crate::error::map;
use crate::STORE;

fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(STORE, format!("corrupt {what} in the items table: {e}"))
}

pub(crate) fn u32_of(what: &str, v: i32) -> Result<u32> {
    u32::try_from(v).map_err(|e| corrupt(what, e))
}

pub(crate) fn i32_of(what: &'static str, v: u32) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid(what, format!("{v} is too large")))
}

fn opt<T>(row: &PgRow, col: &str, make: impl FnOnce(String) -> Result<T>) -> Result<Option<T>> {
    let v: Option<String> = row.try_get(col).map_err(map)?;
    v.map(make).transpose().map_err(|e| corrupt(col, e))
}

/// The `progress` column where a statement reads it (item reads and listings); the
/// claim's statements leave it out, as a new attempt has reported none.
fn progress(row: &PgRow) -> Result<Option<Progress>> {
    match row.try_get::<Option<String>, _>("progress") {
        Ok(text) => text
            .map(|t| Progress::decode(&t))
            .transpose()
            .map_err(|e| corrupt("progress", e)),
        Err(sqlx::Error::ColumnNotFound(_)) => Ok(None),
        Err(e) => Err(map(e)),
    }
}

/// An item from a row holding the columns of [`crate::sql::ITEM_COLS`].
pub(crate) fn item(row: &PgRow) -> Result<Item> {
    let id: Uuid = row.try_get("id").map_err(map)?;
    let state: String = row.try_get("state").map_err(map)?;
    let queue: String = row.try_get("queue").map_err(map)?;
    let get_i64 = |c: &str| row.try_get::<i64, _>(c).map_err(map);
    let get_i32 = |c: &str| row.try_get::<i32, _>(c).map_err(map);
    let lease: Option<i64> = row.try_get("lease_expires_at").map_err(map)?;
    Ok(Item {
        id: ItemId::from_uuid(id),
        queue: QueueName::new(queue).map_err(|e| corrupt("queue", e))?,
        payload: row.try_get("payload").map_err(map)?,
        stream: opt(row, "stream", StreamKey::new)?,
        scope: opt(row, "scope", ScopeKey::new)?,
        dedup_key: opt(row, "dedup_key", DedupKey::new)?,
        priority: row.try_get("priority").map_err(map)?,
        run_at: Timestamp::from_micros(get_i64("run_at")?),
        state: state
            .parse::<ItemState>()
            .map_err(|e| corrupt("state", e))?,
        attempt: u32_of("attempt", get_i32("attempt")?)?,
        owner: opt(row, "owner", OwnerId::new)?,
        lease_expires_at: lease.map(Timestamp::from_micros),
        renewals: u32_of("renewals", get_i32("renewals")?)?,
        stalls: u32_of("stalls", get_i32("stalls")?)?,
        max_attempts: u32_of("max_attempts", get_i32("max_attempts")?)?,
        max_stalls: u32_of("max_stalls", get_i32("max_stalls")?)?,
        max_renewals: u32_of("max_renewals", get_i32("max_renewals")?)?,
        last_error: row.try_get("last_error").map_err(map)?,
        created_at: Timestamp::from_micros(get_i64("created_at")?),
        updated_at: Timestamp::from_micros(get_i64("updated_at")?),
        lease: LeaseId::from_i64(get_i64("lease")?),
        progress: progress(row)?,
    })
}
