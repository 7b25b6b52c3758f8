//! Store wrappers that record what every `complete` was told: [`Ledger`] in memory,
//! per token, and [`LedgerStore`] in a file that outlives a killed process. Both are
//! written with `tenure_core::forward_store!`, so every other method passes through.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What every `complete` through a [`Ledger`] was told, per token.
#[derive(Default, Debug)]
pub struct Told {
    /// Tokens a complete answered `Accepted` for, in order, with when the answer
    /// came.
    pub accepted: Vec<(tenure_core::LeaseToken, Instant)>,
    /// Tokens a complete answered `LeaseLost` for.
    pub lost: Vec<tenure_core::LeaseToken>,
    /// Tokens of completes that got no answer (an error): applied or not.
    pub unanswered: Vec<tenure_core::LeaseToken>,
}

/// A store wrapper that records what each `complete` was told; every other call
/// passes through.
#[derive(Clone, Debug)]
pub struct Ledger<S> {
    /// The wrapped store.
    pub inner: S,
    /// What the completes were told, shared by every clone.
    pub told: Arc<Mutex<Told>>,
}

impl<S> Ledger<S> {
    /// Wraps `inner` with an empty record.
    pub fn new(inner: S) -> Self {
        Ledger {
            inner,
            told: Arc::default(),
        }
    }
}

tenure_core::forward_store! {
    impl<S: tenure_core::Store> tenure_core::Store for Ledger<S> {
        forward self => self.inner;

        async fn complete(
            &self,
            p: tenure_core::CompleteParams,
        ) -> tenure_core::Result<Vec<tenure_core::TokenOutcome>> {
            let tokens = p.tokens.clone();
            let answer = self.inner.complete(p).await;
            let mut told = self.told.lock().expect("the ledger's lock");
            match &answer {
                Ok(outcomes) => {
                    for (t, o) in tokens.iter().zip(outcomes) {
                        match o {
                            tenure_core::TokenOutcome::Accepted => {
                                told.accepted.push((*t, Instant::now()))
                            }
                            tenure_core::TokenOutcome::LeaseLost
                            | tenure_core::TokenOutcome::OutOfOrder => told.lost.push(*t),
                        }
                    }
                }
                Err(_) => told.unanswered.extend(tokens),
            }
            answer
        }
    }
}

/// A store wrapper that appends one line `<id> <attempt>` per completion the store
/// accepted to a file, written once the answer is in. A process killed between the
/// commit and the write leaves a completion out, never in twice.
#[derive(Debug)]
pub struct LedgerStore {
    inner: Arc<dyn tenure_core::Store>,
    file: Mutex<std::fs::File>,
}

impl LedgerStore {
    /// Wraps `inner`, appending to the file at `path` (created when missing).
    pub fn new(inner: Arc<dyn tenure_core::Store>, path: &std::path::Path) -> LedgerStore {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the ledger file opens");
        LedgerStore {
            inner,
            file: Mutex::new(file),
        }
    }

    /// The `(id, attempt)` lines of a ledger file; a torn last line is ignored.
    pub fn read(path: &std::path::Path) -> Vec<(tenure_core::ItemId, u32)> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let (id, attempt) = l.split_once(' ')?;
                Some((id.parse().ok()?, attempt.parse().ok()?))
            })
            .collect()
    }
}

tenure_core::forward_store! {
    impl tenure_core::Store for LedgerStore {
        forward self => self.inner;

        async fn complete(
            &self,
            p: tenure_core::CompleteParams,
        ) -> tenure_core::Result<Vec<tenure_core::TokenOutcome>> {
            use std::io::Write;
            let tokens = p.tokens.clone();
            let out = self.inner.complete(p).await?;
            let mut lines = String::new();
            for (t, o) in tokens.iter().zip(&out) {
                if *o == tenure_core::TokenOutcome::Accepted {
                    lines.push_str(&format!("{} {}\n", t.id, t.attempt));
                }
            }
            self.file
                .lock()
                .expect("the ledger file's lock")
                .write_all(lines.as_bytes())
                .expect("the ledger line is written");
            Ok(out)
        }
    }
}
