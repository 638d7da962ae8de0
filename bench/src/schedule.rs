//! When each batch is due: the send schedule that latency is measured from.
//!
//! Under `--rate` the schedule is open loop: the k-th batch of a producer is
//! due at `start + (bytes before it) / rate`, whatever happened to the
//! batches before it. Latency counts from that due time, so a send the
//! engine (or a busy lane) delayed is charged its wait: no coordinated
//! omission. Without `--rate` the loop is closed (a lane sends when its
//! previous append is acknowledged) and a batch is due when it is sent.

use std::time::{Duration, Instant};

/// Where latency is measured from, for the JSON report.
pub const LATENCY_FROM: &str = "schedule";

/// One producer's send schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Bytes per second, if open loop.
    rate: Option<f64>,
    /// When the next batch is due (open loop).
    next: Instant,
}

impl Schedule {
    pub fn new(rate: Option<f64>, start: Instant) -> Schedule {
        Schedule { rate, next: start }
    }

    /// When the next batch is due; `now` in a closed loop.
    pub fn peek(&self, now: Instant) -> Instant {
        match self.rate {
            Some(_) => self.next,
            None => now,
        }
    }

    /// Takes the next slot, of `len` bytes: returns its due time.
    pub fn take(&mut self, len: u64, now: Instant) -> Instant {
        match self.rate {
            Some(rate) => {
                let due = self.next;
                self.next = due + Duration::from_secs_f64(len as f64 / rate);
                due
            }
            None => now,
        }
    }
}

/// Describes the schedule for the report.
pub fn describe(rate_mb_per_s: Option<f64>) -> String {
    match rate_mb_per_s {
        Some(r) => format!(
            "open loop, {r} MB/s across producers, sends spaced evenly; latency from each batch's due time"
        ),
        None => "closed loop: a lane sends when its previous append is acknowledged, so a batch is due when sent".to_string(),
    }
}

/// Asks the kernel to wake this thread's timed sleeps on time (timer slack
/// 1 ns instead of 50 µs), so that pacing with `park_timeout` sends close
/// to schedule. Best effort: returns whether it took.
pub fn precise_sleeps() -> bool {
    // `/proc/thread-self` links to `<pid>/task/<tid>`; the slack is set
    // through `/proc/<tid>/timerslack_ns`.
    let Ok(link) = std::fs::read_link("/proc/thread-self") else {
        return false;
    };
    let Some(tid) = link.file_name() else {
        return false;
    };
    let path = std::path::Path::new("/proc")
        .join(tid)
        .join("timerslack_ns");
    std::fs::write(&path, "1").is_ok()
        && std::fs::read_to_string(&path).is_ok_and(|v| v.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_due_times_ignore_when_sends_happen() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Some(1e6), t0);
        // A send far behind schedule does not push later slots back.
        let late = t0 + Duration::from_secs(5);
        assert_eq!(s.take(1000, late), t0);
        assert_eq!(s.take(1000, late), t0 + Duration::from_millis(1));
        assert_eq!(s.peek(late), t0 + Duration::from_millis(2));
    }

    #[test]
    fn this_thread_gets_precise_sleeps() {
        // The bench runs as root on Linux; a user without the right to set
        // its own slack sees this fail, and pacing would be 50 µs coarse.
        let t = std::thread::spawn(precise_sleeps);
        assert!(t.join().expect("thread"), "timer slack not set");
    }

    #[test]
    fn closed_loop_batches_are_due_when_sent() {
        let t0 = Instant::now();
        let mut s = Schedule::new(None, t0);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(s.take(1000, later), later);
        assert_eq!(s.peek(later), later);
    }
}
