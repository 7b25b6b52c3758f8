//! Tenure: every unit of work has exactly one temporary owner at a time. Opens any store by URL.
#![deny(missing_docs)]
