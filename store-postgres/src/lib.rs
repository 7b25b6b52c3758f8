//! PostgreSQL Tenure store: FOR UPDATE SKIP LOCKED claims and a partial unique index per scope.
#![deny(missing_docs)]
