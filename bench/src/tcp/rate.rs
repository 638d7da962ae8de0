//! Whether an open-loop run held its `--rate`.

use serde_json::{json, Value};
use std::time::Duration;

/// The share of the target rate a run must reach to count as held.
pub const HELD_AT: f64 = 0.95;

/// A fixed-rate run's target against what the server took.
#[derive(Debug, Clone, Copy)]
pub struct RateCheck {
    /// MB/s asked for (10^6 bytes).
    pub target: f64,
    /// MB/s acknowledged over the measured window.
    pub achieved: f64,
    /// The furthest a measured send started behind its due time.
    pub max_lag: Duration,
}

impl RateCheck {
    /// Held when the acknowledged rate reached [`HELD_AT`] of the target.
    pub fn held(&self) -> bool {
        self.achieved >= HELD_AT * self.target
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let lag = self.max_lag.as_secs_f64() * 1e3;
        if self.held() {
            format!(
                "rate held: {:.1} of {} MB/s; sends at most {lag:.2} ms behind schedule",
                self.achieved, self.target
            )
        } else {
            format!(
                "RATE NOT HELD: the server took {:.1} of the {} MB/s asked ({:.0}%); sends fell up to {lag:.1} ms behind schedule, and latency from the schedule counts that wait",
                self.achieved,
                self.target,
                100.0 * self.achieved / self.target
            )
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "target_mb_per_s": self.target,
            "achieved_mb_per_s": self.achieved,
            "held": self.held(),
            "max_send_lag_us": self.max_lag.as_secs_f64() * 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_only_within_five_percent_of_the_target() {
        let at = |achieved| RateCheck {
            target: 100.0,
            achieved,
            max_lag: Duration::ZERO,
        };
        assert!(at(95.0).held());
        assert!(at(120.0).held());
        assert!(!at(94.9).held());
        assert!(at(50.0).describe().starts_with("RATE NOT HELD"));
    }
}
