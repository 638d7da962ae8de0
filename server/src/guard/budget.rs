//! The bytes of requests in flight, over all connections on all shards:
//! a connection takes room before it reads request bytes and gives it back
//! once the request is answered. When there is no room it waits (its
//! socket is not read, so the kernel's window pushes back on the client)
//! instead of allocating.

use event_listener::Event;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Room for `total` bytes.
#[derive(Debug)]
pub struct Budget {
    total: u64,
    free: AtomicU64,
    freed: Event,
}

/// Room taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Grant {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Budget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Arc<Budget> {
        Arc::new(Budget {
            total,
            free: AtomicU64::new(total),
            freed: Event::new(),
        })
    }

    /// Bytes taken now.
    pub fn in_use(&self) -> u64 {
        self.total - self.free.load(Ordering::Acquire)
    }

    /// An empty grant, to grow with [`Budget::grow`].
    pub fn empty(self: &Arc<Self>) -> Grant {
        Grant {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// Adds `bytes` to `grant`, waiting until there is room. `bytes` over
    /// the whole budget is cut to it (never waits forever).
    pub async fn grow(&self, grant: &mut Grant, bytes: u64) {
        let bytes = bytes.min(self.total.saturating_sub(grant.bytes));
        loop {
            if self.try_take(bytes) {
                grant.bytes += bytes;
                return;
            }
            let listener = self.freed.listen();
            if self.try_take(bytes) {
                grant.bytes += bytes;
                return;
            }
            listener.await;
        }
    }

    fn try_take(&self, bytes: u64) -> bool {
        self.free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(bytes)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        if bytes > 0 {
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
        self.budget.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_grant_waits_for_room_and_dropping_gives_it_back() {
        let budget = Budget::new(100);
        let mut a = budget.empty();
        pollster::block_on(budget.grow(&mut a, 70));
        assert_eq!(budget.in_use(), 70);
        let b = budget.clone();
        let waiter = std::thread::spawn(move || {
            let mut g = b.empty();
            pollster::block_on(b.grow(&mut g, 50));
            g.bytes()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "no room for 50 of 100 while 70 are held"
        );
        assert_eq!(budget.in_use(), 70);
        drop(a);
        assert_eq!(waiter.join().expect("join"), 50);
        assert_eq!(budget.in_use(), 0);
    }
}
