//! The group's side of its leader lease (`lease.rs`): asking the peers to
//! confirm this leader, and publishing until when they did.

use super::lease::LeaderLease;
use super::Group;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a leader waits between questions: a tick until its leadership
/// was first confirmed (so clients learn of a new leader within a tick or
/// two of the majority's answer), then a heartbeat interval (a question
/// rides on a heartbeat; asking more often only adds messages).
fn question_interval(confirmed: bool, tick: Duration, heartbeat_ticks: usize) -> Duration {
    if confirmed {
        tick.saturating_mul(u32::try_from(heartbeat_ticks).unwrap_or(u32::MAX))
    } else {
        tick
    }
}

impl Group {
    /// While leader, asks the peers to confirm it (`lease.rs`): every
    /// tick until the first confirmation of its leadership, then once a
    /// heartbeat interval.
    pub(super) fn ask_confirmation(&mut self, now: Instant) {
        let every = question_interval(
            self.lease.until_ms != 0,
            self.opts.tick,
            self.opts.heartbeat_ticks,
        );
        if !self.is_leader() || now.duration_since(self.last_question) < every {
            return;
        }
        self.last_question = now;
        let at = self.shared.ms_of(now);
        self.raw.read_index(LeaderLease::question(at));
    }

    /// Publishes until when this node's leadership is confirmed (0 when it
    /// does not lead).
    pub(super) fn publish_lease(&self) {
        let until = if self.is_leader() {
            self.lease.until_ms
        } else {
            0
        };
        self.status()
            .confirmed_until
            .store(until, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::question_interval;
    use std::time::Duration;

    #[test]
    fn a_leader_asks_every_tick_until_confirmed_then_every_heartbeat() {
        let tick = Duration::from_millis(100);
        assert_eq!(question_interval(false, tick, 3), tick);
        assert_eq!(question_interval(true, tick, 3), Duration::from_millis(300));
        assert_eq!(question_interval(true, tick, 1), tick);
        // A heartbeat count past u32 saturates rather than wrapping.
        assert_eq!(
            question_interval(true, tick, usize::MAX),
            tick.saturating_mul(u32::MAX)
        );
    }
}
