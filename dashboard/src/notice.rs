//! One-time notices: what an action did, shown once on the page it redirects to.
//!
//! An action answers `303 See Other` to a page with `notice=ID` in its query; that page
//! takes the notice out of this store and shows it. A reload of the page finds the
//! notice gone and says so: it never repeats the action (POST-redirect-GET).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Notices kept at most; past it the oldest are dropped.
const MAX_NOTICES: usize = 1024;
/// How long a notice waits for its page.
const KEEP_FOR: Duration = Duration::from_secs(10 * 60);

/// What an action did, for the page after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Notice {
    /// A short heading: `Paused`, `Requeued`.
    pub(crate) title: String,
    /// One sentence.
    pub(crate) text: String,
    /// An outcome per item (id, outcome), when there is one.
    pub(crate) rows: Vec<(String, String)>,
}

/// The notice a page shows: the one it was sent with, or word that it was shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Shown now, for the first and only time.
    Fresh(Notice),
    /// Already shown (a reload) or too old.
    Gone,
}

/// The notices waiting for their page, under unguessable ids.
#[derive(Debug)]
pub(crate) struct Notices {
    keys: RandomState,
    counter: AtomicU64,
    waiting: Mutex<HashMap<String, (Instant, Notice)>>,
}

impl Default for Notices {
    fn default() -> Self {
        Notices {
            keys: RandomState::new(),
            counter: AtomicU64::new(0),
            waiting: Mutex::new(HashMap::new()),
        }
    }
}

impl Notices {
    /// Keeps `notice`; answers its id (16 hex digits, keyed by a random hasher).
    pub(crate) fn put(&self, notice: Notice) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let id = format!(
            "{:016x}{:016x}",
            self.keys.hash_one(n),
            self.keys.hash_one(!n)
        );
        let now = Instant::now();
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|_, (at, _)| now.duration_since(*at) < KEEP_FOR);
        if waiting.len() >= MAX_NOTICES {
            if let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            {
                waiting.remove(&oldest);
            }
        }
        waiting.insert(id.clone(), (now, notice));
        id
    }

    /// Takes the notice `id` out: it is shown once.
    pub(crate) fn take(&self, id: &str) -> Shown {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        match waiting.remove(id) {
            Some((at, notice)) if at.elapsed() < KEEP_FOR => Shown::Fresh(notice),
            _ => Shown::Gone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_shown_once() {
        let n = Notices::default();
        let notice = Notice {
            title: "Paused".into(),
            text: "Paused queue emails.".into(),
            rows: vec![],
        };
        let a = n.put(notice.clone());
        let b = n.put(notice.clone());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_eq!(n.take(&a), Shown::Fresh(notice));
        assert_eq!(n.take(&a), Shown::Gone);
        assert_eq!(n.take("nope"), Shown::Gone);
    }
}
