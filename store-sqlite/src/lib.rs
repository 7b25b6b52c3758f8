//! SQLite Tenure store: BEGIN IMMEDIATE claims on an embedded database file.
#![deny(missing_docs)]
