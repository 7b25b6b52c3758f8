//! Runnable Tenure programs live beside this crate as examples.
#![deny(missing_docs)]
