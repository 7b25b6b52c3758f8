//! The dashboard's router without a socket (`tower::ServiceExt::oneshot`): pages,
//! JSON twins, actions and their refusals, on the memory store, a SQLite file, a
//! PostgreSQL schema and a Redis key prefix of each test's own. One module per page
//! family, as the dashboard's `routes/` are cut, plus `guards` for what every page
//! shares.
//!
//! PostgreSQL and Redis run at `TENURE_POSTGRES_URL` and `TENURE_REDIS_URL`; without a
//! server those cases skip, unless `TENURE_REQUIRE_STORES=1`, when they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use common::*;
use tenure::{Clock, DynStore, ManualClock, MemoryStore, NewItem, Store, StoreExt, Timestamp};
use tenure_dashboard::{router, Access, Action, DashboardConfig};
use tenure_test_support::on_every_store;

fn app(store: &DynStore) -> Router {
    router(store.clone(), DashboardConfig::new().environment("test"))
}

mod dead;
mod guards;
mod health;
mod history;
mod items;
mod leases;
mod limits;
mod overview;
mod queues;
mod search;
