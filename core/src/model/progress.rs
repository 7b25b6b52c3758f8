//! A running attempt's progress, as its handler reports it with its renewals.

use std::fmt;

use crate::error::{Error, Result};

/// Longest progress message, in bytes.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 200;

/// Steps of a progress fraction: it is kept in ten-thousandths (basis points), so it
/// compares exactly and every store keeps it as an integer.
const STEPS: u16 = 10_000;

/// How far a running attempt has come: a fraction in `0..=1` and a short message.
///
/// A handler reports it through its job; it travels with the renewals the runtime
/// already sends ([`RenewParams::progress`](crate::RenewParams::progress)), and a store
/// keeps it on the item only when that renewal is accepted, so a superseded holder's
/// progress is never stored (G3). [`Item::progress`](crate::Item::progress) reads it
/// back, with the attempt that reported it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Progress {
    steps: u16,
    message: String,
    attempt: u32,
}

impl Progress {
    /// Progress `fraction` (`0.0..=1.0`, kept to four decimals) with `message` (at most
    /// [`MAX_PROGRESS_MESSAGE_BYTES`] bytes, no control characters; may be empty).
    /// Anything else is [`Error::InvalidInput`] naming `progress` or
    /// `progress_message`.
    pub fn new(fraction: f64, message: impl Into<String>) -> Result<Self> {
        if !fraction.is_finite() || !(0.0..=1.0).contains(&fraction) {
            return Err(Error::invalid(
                "progress",
                format!("{fraction} is not a fraction in 0..=1"),
            ));
        }
        let message = message.into();
        check_message(&message)?;
        // In range by the check above.
        let steps = (fraction * f64::from(STEPS)).round() as u16;
        Ok(Progress {
            steps,
            message,
            attempt: 0,
        })
    }

    /// The same progress, as reported by `attempt` (set by the store that keeps it).
    pub fn for_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// The fraction done, in `0.0..=1.0`.
    pub fn fraction(&self) -> f64 {
        f64::from(self.steps) / f64::from(STEPS)
    }

    /// The fraction done in percent, rounded down (`0..=100`).
    pub fn percent(&self) -> u8 {
        // At most 100 by construction.
        u8::try_from(self.steps / (STEPS / 100)).unwrap_or(100)
    }

    /// The handler's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The attempt that reported it (0 before a store kept it).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The text a store may keep it as: `<attempt> <steps> <message>`.
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.attempt, self.steps, self.message)
    }

    /// Reads back what [`Progress::encode`] wrote; the error says why the text is not
    /// progress, for the store's own corrupt-value error.
    pub fn decode(text: &str) -> std::result::Result<Self, String> {
        let bad = || format!("progress {text:?} is not `<attempt> <steps> <message>`");
        let mut parts = text.splitn(3, ' ');
        let attempt = parts.next().and_then(|a| a.parse().ok()).ok_or_else(bad)?;
        let steps: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let message = parts.next().ok_or_else(bad)?.to_owned();
        if steps > STEPS {
            return Err(bad());
        }
        Ok(Progress {
            steps,
            message,
            attempt,
        })
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.steps / 100, self.steps % 100);
        if frac == 0 {
            write!(f, "{whole}%")?;
        } else {
            write!(f, "{whole}.{frac:02}%")?;
        }
        if !self.message.is_empty() {
            write!(f, " {}", self.message)?;
        }
        Ok(())
    }
}

fn check_message(message: &str) -> Result<()> {
    if message.len() > MAX_PROGRESS_MESSAGE_BYTES {
        return Err(Error::invalid(
            "progress_message",
            format!(
                "{} bytes is over {MAX_PROGRESS_MESSAGE_BYTES}",
                message.len()
            ),
        ));
    }
    if message.chars().any(char::is_control) {
        return Err(Error::invalid(
            "progress_message",
            "must not hold control characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fraction_outside_0_to_1_or_a_long_message_is_refused_naming_the_field() {
        for bad in [-0.01, 1.01, f64::NAN, f64::INFINITY] {
            let e = Progress::new(bad, "").unwrap_err();
            assert!(e.to_string().contains("progress"), "{e}");
        }
        let long = "m".repeat(MAX_PROGRESS_MESSAGE_BYTES + 1);
        assert!(Progress::new(0.5, long)
            .unwrap_err()
            .to_string()
            .contains("progress_message"));
        assert!(Progress::new(0.5, "a\nb").is_err());
    }

    #[test]
    fn progress_round_trips_through_its_stored_text() {
        let p = Progress::new(0.4217, "rows 4217 of 10000")
            .unwrap()
            .for_attempt(3);
        assert_eq!(Progress::decode(&p.encode()).unwrap(), p);
        assert_eq!(p.percent(), 42);
        assert_eq!(p.to_string(), "42.17% rows 4217 of 10000");
        let empty = Progress::new(1.0, "").unwrap();
        assert_eq!(Progress::decode(&empty.encode()).unwrap(), empty);
        assert!(Progress::decode("1 10001 x").is_err());
        assert!(Progress::decode("garbage").is_err());
    }
}
