//! The bytes of requests in flight, over all connections on all shards:
//! a connection takes room before it reads request bytes and gives it back
//! once the request is answered. When there is no room it waits (its
//! socket is not read, so the kernel's window pushes back on the client)
//! instead of allocating.
//!
//! **Shares.** The connections of one peer address (an IPv6 address by its
//! /64) hold at most half the budget together, or one request of the
//! largest size if that is more ([`Budget::share`]), signed
//! in or not, so one host, whatever its credentials, cannot hold every
//! byte of it (say with a few requests of the largest size whose last
//! bytes it trickles). The addresses are counted in a fixed table of
//! atomic counters, by a hash of the address: no lock on the read path;
//! two addresses that meet in one slot share one share, which only makes
//! their bound stricter.

use crate::guard::login::throttle::key;
use event_listener::Event;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Slots of the per-address table.
const SLOTS: usize = 1024;

/// Room for `total` bytes.
#[derive(Debug)]
pub struct Budget {
    total: u64,
    share: u64,
    free: AtomicU64,
    freed: Event,
    /// Bytes held by the addresses hashed to each slot.
    held: Box<[AtomicU64]>,
}

/// Room taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Grant {
    budget: Arc<Budget>,
    bytes: u64,
    /// The slot of the address the room is held for.
    slot: usize,
}

impl Budget {
    /// A budget of `total` bytes, for requests of at most `max_request`.
    pub fn new(total: u64, max_request: u64) -> Arc<Budget> {
        Arc::new(Budget {
            total,
            share: (total / 2).max(max_request).min(total),
            free: AtomicU64::new(total),
            freed: Event::new(),
            held: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// The most one address's connections hold together: half the
    /// budget, or the largest request if that is more (a request is read
    /// only into room it holds, so one must fit an address's share).
    pub fn share(&self) -> u64 {
        self.share
    }

    /// Bytes taken now.
    pub fn in_use(&self) -> u64 {
        self.total - self.free.load(Ordering::Acquire)
    }

    /// An empty grant for a connection from `peer`, to grow with
    /// [`Budget::grow`].
    pub fn empty(self: &Arc<Self>, peer: Option<IpAddr>) -> Grant {
        let slot = peer.map_or(0, |ip| {
            let bytes = match key(ip) {
                IpAddr::V4(v4) => u128::from(u32::from(v4)),
                IpAddr::V6(v6) => u128::from(v6),
            };
            (xxhash_rust::xxh3::xxh3_64(&bytes.to_le_bytes()) % SLOTS as u64) as usize
        });
        Grant {
            budget: self.clone(),
            bytes: 0,
            slot,
        }
    }

    /// Adds `bytes` to `grant`, waiting until there is room, in the whole
    /// budget and in the address's share. `bytes` over the share is cut to
    /// it (never waits forever).
    pub async fn grow(&self, grant: &mut Grant, bytes: u64) {
        let bytes = bytes.min(self.share().saturating_sub(grant.bytes));
        loop {
            if self.try_take(grant.slot, bytes) {
                grant.bytes += bytes;
                return;
            }
            let listener = self.freed.listen();
            if self.try_take(grant.slot, bytes) {
                grant.bytes += bytes;
                return;
            }
            listener.await;
        }
    }

    /// Takes `bytes` from the address's share, then from the whole budget
    /// (giving the share back if the budget has no room).
    fn try_take(&self, slot: usize, bytes: u64) -> bool {
        let share = self.share();
        let held = &self.held[slot];
        if held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                h.checked_add(bytes).filter(|n| *n <= share)
            })
            .is_err()
        {
            return false;
        }
        let taken = self
            .free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(bytes)
            })
            .is_ok();
        if !taken {
            held.fetch_sub(bytes, Ordering::AcqRel);
        }
        taken
    }

    fn give_back(&self, slot: usize, bytes: u64) {
        if bytes > 0 {
            self.held[slot].fetch_sub(bytes, Ordering::AcqRel);
            self.free.fetch_add(bytes, Ordering::AcqRel);
            self.freed.notify(usize::MAX);
        }
    }
}

impl Grant {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        self.budget.give_back(self.slot, self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_grant_waits_for_room_and_dropping_gives_it_back() {
        let budget = Budget::new(100, 10);
        let ip = |s: &str| Some(s.parse::<IpAddr>().expect("ip"));
        let mut a = budget.empty(ip("10.0.0.1"));
        pollster::block_on(budget.grow(&mut a, 45));
        let mut b = budget.empty(ip("10.0.0.2"));
        pollster::block_on(budget.grow(&mut b, 45));
        assert_eq!(budget.in_use(), 90);
        let c = budget.clone();
        let waiter = std::thread::spawn(move || {
            let mut g = c.empty(Some("10.0.0.3".parse().expect("ip")));
            pollster::block_on(c.grow(&mut g, 20));
            g.bytes()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "no room for 20 of 100 while 90 are held"
        );
        assert_eq!(budget.in_use(), 90);
        drop(a);
        assert_eq!(waiter.join().expect("join"), 20);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn one_address_holds_at_most_half_and_another_still_finds_room() {
        let budget = Budget::new(100, 10);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let mut one = budget.empty(Some(a));
        pollster::block_on(budget.grow(&mut one, 40));
        let b = budget.clone();
        let over = std::thread::spawn(move || {
            let mut g = b.empty(Some(a));
            pollster::block_on(b.grow(&mut g, 20));
            g.bytes()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!over.is_finished(), "the address's 40 + 20 is past its 50");
        let mut other = budget.empty(Some("10.0.0.2".parse().expect("ip")));
        pollster::block_on(budget.grow(&mut other, 50));
        assert_eq!(budget.in_use(), 90);
        drop(one);
        assert_eq!(over.join().expect("join"), 20);
        drop(other);
        assert_eq!(budget.in_use(), 0);
    }
}
