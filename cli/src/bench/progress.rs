//! The progress bar on stderr: a spinner while seeding, then items finished out of
//! the run's total. Hidden when asked, and when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tenure_benches::tally::Tally;

/// The bar, and the task that moves it.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    ticker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Progress {
    /// A bar on stderr when `wanted` and stderr is a terminal; otherwise nothing.
    pub(crate) fn new(wanted: bool) -> Self {
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            bar,
            ticker: Mutex::new(None),
        }
    }

    fn stop_ticker(&self) {
        let old = self.ticker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = old {
            t.abort();
        }
    }

    /// A spinner with `message`.
    pub(crate) fn spin(&self, message: String) {
        let Some(bar) = &self.bar else { return };
        self.stop_ticker();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_length(0);
        bar.set_message(message);
    }

    /// Items finished of `total`, read from `tally` ten times a second.
    pub(crate) fn count(&self, message: &str, total: u64, tally: Arc<Tally>) {
        let Some(bar) = &self.bar else { return };
        self.stop_ticker();
        bar.set_length(total);
        bar.set_position(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} items, {elapsed} (eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(message.to_owned());
        bar.reset_elapsed();
        let moved = bar.clone();
        let ticker = tokio::spawn(async move {
            loop {
                moved.set_position(tally.finished());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        *self.ticker.lock().unwrap_or_else(|p| p.into_inner()) = Some(ticker);
    }

    /// Takes the bar off the screen.
    pub(crate) fn finish(&self) {
        self.stop_ticker();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
