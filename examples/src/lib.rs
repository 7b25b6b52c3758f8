//! Runnable Tenure programs live beside this crate as examples. This library holds
//! what they share: their argument handling and the check that a file they are about
//! to replace is a Tenure database ([`args`]), tested in `tests/args.rs`.
#![deny(missing_docs)]

pub mod args;
