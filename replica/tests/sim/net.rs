//! The simulated network: every message is delayed a seeded number of
//! ticks (so messages overtake each other), some are dropped or delivered
//! twice, a partition cuts one node off from the others both ways, and a
//! link between two nodes can be down (both ways) while each still hears
//! the third: a partial partition.

use raft::eraftpb::Message;
use std::collections::BTreeMap;

/// How often the network misbehaves, per message (parts per thousand).
#[derive(Debug, Clone, Copy)]
pub struct NetFaults {
    pub drop_per_mille: u32,
    pub dup_per_mille: u32,
    /// Delays are 1..=max_delay ticks.
    pub max_delay: u64,
}

pub struct Net {
    rng: fastrand::Rng,
    pub faults: NetFaults,
    /// (delivery tick, sequence) -> message.
    queue: BTreeMap<(u64, u64), Message>,
    seq: u64,
    now: u64,
    /// The node cut off from the others, if any.
    pub isolated: Option<u64>,
    /// The link that is down, if any.
    pub link_down: Option<(u64, u64)>,
    pub sent: u64,
    pub dropped: u64,
}

impl Net {
    pub fn new(seed: u64, faults: NetFaults) -> Net {
        Net {
            rng: fastrand::Rng::with_seed(seed),
            faults,
            queue: BTreeMap::new(),
            seq: 0,
            now: 0,
            isolated: None,
            link_down: None,
            sent: 0,
            dropped: 0,
        }
    }

    fn cut(&self, a: u64, b: u64) -> bool {
        self.isolated.is_some_and(|i| (a == i) != (b == i))
            || self
                .link_down
                .is_some_and(|(x, y)| (a, b) == (x, y) || (a, b) == (y, x))
    }

    /// Sends `msgs` (from their `from` to their `to`).
    pub fn send_all(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            self.sent += 1;
            if self.cut(m.from, m.to) || self.rng.u32(..1000) < self.faults.drop_per_mille {
                self.dropped += 1;
                continue;
            }
            let copies = if self.rng.u32(..1000) < self.faults.dup_per_mille {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let at = self.now + self.rng.u64(1..=self.faults.max_delay.max(1));
                self.seq += 1;
                self.queue.insert((at, self.seq), m.clone());
            }
        }
    }

    /// Moves time to `now` and takes the messages due by then, in delivery
    /// order (a partition made since they were sent drops them too).
    pub fn due(&mut self, now: u64) -> Vec<Message> {
        self.now = now;
        let later = self.queue.split_off(&(now + 1, 0));
        let due = std::mem::replace(&mut self.queue, later);
        due.into_values()
            .filter(|m| !self.cut(m.from, m.to))
            .collect()
    }
}
