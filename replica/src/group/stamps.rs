//! What a leader stamps each send with: its partition's next offset and
//! last timestamp, read from the engine at the first send of a term to
//! that partition (every earlier entry applied by then), and kept as it
//! stamps.
//!
//! The read never blocks the group's loop: a task on the partition's shard
//! reads the partition's stats and reports them to the loop's inbox
//! (`Inbox::Stamped`), and the sends to that partition wait among the held
//! proposals until it does. A report from before the stamps were last
//! forgotten (leadership came or went, a proposal was dropped) is stale
//! and ignored; a read that never reports is asked again after a second.

use corelog::RequestError;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a read may go unanswered before it is asked again.
const ASK_AGAIN: Duration = Duration::from_secs(1);

/// A leader's stamps, by partition.
#[derive(Default)]
pub(super) struct StampBook {
    /// Each partition's next offset and last timestamp.
    known: HashMap<u64, (u64, u64)>,
    /// Reads that failed: the next send to the partition is refused with it.
    failed: HashMap<u64, RequestError>,
    /// Reads asked and not yet answered: when.
    asked: HashMap<u64, Instant>,
    /// Bumped whenever the stamps are forgotten.
    epoch: u64,
}

impl StampBook {
    /// Whether `partition`'s stamp is known (or its read failed, which
    /// the next send to it is refused with).
    pub(super) fn has(&self, partition: u64) -> bool {
        self.known.contains_key(&partition) || self.failed.contains_key(&partition)
    }

    /// `partition`'s next offset and last timestamp, or why they could not
    /// be read (said once); `None` while unknown.
    pub(super) fn take(&mut self, partition: u64) -> Option<Result<(u64, u64), RequestError>> {
        if let Some(&s) = self.known.get(&partition) {
            return Some(Ok(s));
        }
        self.failed.remove(&partition).map(Err)
    }

    /// Whether a read of `partition`'s stamp is to be asked now (none is
    /// under way, or the last went unanswered too long); noted as asked.
    pub(super) fn ask(&mut self, partition: u64, now: Instant) -> bool {
        match self.asked.get(&partition) {
            Some(t) if now.duration_since(*t) < ASK_AGAIN => false,
            _ => {
                self.asked.insert(partition, now);
                true
            }
        }
    }

    pub(super) fn insert(&mut self, partition: u64, next: u64, ts: u64) {
        self.known.insert(partition, (next, ts));
    }

    /// The epoch a read asked now reports with.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A read's answer: kept unless the stamps were forgotten since it was
    /// asked.
    pub(super) fn answered(
        &mut self,
        partition: u64,
        epoch: u64,
        result: Result<(u64, u64), RequestError>,
    ) {
        if epoch != self.epoch {
            return;
        }
        self.asked.remove(&partition);
        match result {
            Ok((next, ts)) => {
                self.known.insert(partition, (next, ts));
            }
            Err(e) => {
                self.failed.insert(partition, e);
            }
        }
    }

    /// Forgets one partition's stamp (its log was cut).
    pub(super) fn forget(&mut self, partition: u64) {
        self.known.remove(&partition);
    }

    /// Forgets every stamp and every read under way.
    pub(super) fn clear(&mut self) {
        self.known.clear();
        self.failed.clear();
        self.asked.clear();
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{StampBook, ASK_AGAIN};
    use std::time::{Duration, Instant};

    #[test]
    fn a_read_unanswered_is_asked_again_after_a_while_and_not_before() {
        let mut b = StampBook::default();
        let t0 = Instant::now();
        assert!(b.ask(7, t0), "the first send asks");
        assert!(!b.ask(7, t0 + Duration::from_millis(10)), "under way");
        assert!(!b.ask(7, t0 + ASK_AGAIN - Duration::from_millis(1)));
        assert!(b.ask(8, t0), "another partition's read is its own");
        // Lost (its report never came): asked again.
        assert!(
            b.ask(7, t0 + ASK_AGAIN),
            "asked again once it went unanswered"
        );
        assert!(!b.ask(7, t0 + ASK_AGAIN + Duration::from_millis(1)));
        // Answered: known; a later read is asked at once.
        b.answered(7, b.epoch(), Ok((10, 20)));
        assert!(b.has(7));
        assert!(matches!(b.take(7), Some(Ok((10, 20)))));
        b.forget(7);
        assert!(!b.has(7));
        assert!(b.ask(7, t0 + ASK_AGAIN + Duration::from_millis(2)));
    }

    #[test]
    fn a_report_from_before_the_stamps_were_forgotten_is_ignored() {
        let mut b = StampBook::default();
        let t0 = Instant::now();
        assert!(b.ask(3, t0));
        let asked_in = b.epoch();
        b.clear();
        b.answered(3, asked_in, Ok((5, 6)));
        assert!(!b.has(3), "stale: leadership changed since it was asked");
        assert!(b.ask(3, t0), "the reads under way were forgotten too");
        b.answered(3, b.epoch(), Ok((5, 6)));
        assert!(matches!(b.take(3), Some(Ok((5, 6)))));
    }
}
