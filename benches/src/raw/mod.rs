//! The raw loops every figure is compared with: the same claim and fenced finalize
//! written directly against each backend, with none of the library's other rules (no
//! streams, scopes, dedup, recovery guard or pool). One definition per backend, used by
//! the burn-down benches (`memory`, `sqlite`, `postgres`, `redis`), the `sustained`
//! bench and `pgcost`, so every comparison runs the same raw SQL (or Lua).

use crate::BenchError;

fn raw_err<E>(op: &'static str) -> impl FnOnce(E) -> BenchError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| BenchError::Raw {
        op,
        source: Box::new(e),
    }
}

pub mod memory;
pub mod pg;
pub mod redis;
pub mod sqlite;
