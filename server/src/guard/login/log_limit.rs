//! At most a few log lines a second for one kind of event, so a flood of
//! failures cannot flood the log: the rest are counted and the next line
//! that is written says how many were left out.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines allowed in each one-second window.
#[derive(Debug)]
pub struct LogLimit {
    per_second: u32,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    written: u32,
    suppressed: u64,
}

impl LogLimit {
    /// `per_second` lines a second.
    pub const fn new(per_second: u32) -> LogLimit {
        LogLimit {
            per_second,
            window: Mutex::new(Window {
                start: None,
                written: 0,
                suppressed: 0,
            }),
        }
    }

    /// `Some(left out since the last line)` when a line may be written now.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = w
            .start
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1));
        if fresh {
            w.start = Some(now);
            w.written = 0;
        }
        if w.written >= self.per_second {
            w.suppressed += 1;
            return None;
        }
        w.written += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_its_share_and_counts_the_rest() {
        let l = LogLimit::new(2);
        let t0 = Instant::now();
        assert_eq!(l.allow(t0), Some(0));
        assert_eq!(l.allow(t0), Some(0));
        assert_eq!(l.allow(t0), None);
        assert_eq!(l.allow(t0 + Duration::from_millis(999)), None);
        assert_eq!(l.allow(t0 + Duration::from_secs(1)), Some(2));
    }
}
