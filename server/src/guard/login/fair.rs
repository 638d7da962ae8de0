//! The one budget for argon2: every hash (a sign-in's check, right or
//! wrong; CHANGE_PASSWORD's check of the current password; a new password's
//! or token's hash) runs on this pool's threads, queued by the peer address
//! that asked (an IPv6 address by its /64) and served round robin, so an
//! address that floods it with hashes (right passwords included: LOGIN on a
//! connection already signed in, say) delays another address's sign-in by
//! at most one hash per busy address, not by its whole queue.
//!
//! Waits are bounded: a hash that waited longer than the pool's `max_wait`
//! before a thread took it is not done ([`Refused::Busy`]), and an address
//! holds at most [`PER_ADDRESS`] queued hashes and the pool [`QUEUED`] in
//! all (past either, a hash is refused at once, [`Refused::Busy`] too): a
//! memory bound, above what `--max-connections-per-address` lets one host
//! queue (a connection has one request in flight).

use super::throttle::key;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Hashes one address may have queued.
pub const PER_ADDRESS: usize = 1024;
/// Hashes queued in all.
pub const QUEUED: usize = 16384;

/// Why a hash was not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Too many queued (for the address, or in all), or it waited past the
    /// pool's bound: try again later.
    Busy,
    /// The server is shutting down.
    Closed,
}

type Job = Box<dyn FnOnce(bool) + Send>;

struct Queued {
    job: Job,
    deadline: Instant,
}

#[derive(Default)]
struct Queues {
    by_address: HashMap<IpAddr, VecDeque<Queued>>,
    /// Addresses with queued hashes, in the order they are served.
    ring: VecDeque<IpAddr>,
    queued: usize,
    closed: bool,
}

struct Shared {
    queues: Mutex<Queues>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Hashing threads served fairly by address.
pub struct FairPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    max_wait: Duration,
    /// Queued hashes allowed per address and in all.
    caps: (usize, usize),
}

impl std::fmt::Debug for FairPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairPool")
            .field("threads", &self.threads.len())
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

/// The address a hash is queued under when the peer is unknown.
const UNKNOWN: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

impl FairPool {
    /// Starts `threads` (at least one) threads named `name-N`; a hash that
    /// waits longer than `max_wait` for one is refused.
    pub fn new(threads: usize, name: &str, max_wait: Duration) -> std::io::Result<FairPool> {
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
        });
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&shared))?;
            handles.push(handle);
        }
        Ok(FairPool {
            shared,
            threads: handles,
            max_wait,
            caps: (PER_ADDRESS, QUEUED),
        })
    }

    #[cfg(test)]
    /// The pool with other caps on what is queued.
    fn with_caps(mut self, per_address: usize, queued: usize) -> FairPool {
        self.caps = (per_address, queued);
        self
    }

    /// Runs `hash` on the pool in `peer`'s turn.
    pub async fn run<T: Send + 'static>(
        &self,
        peer: Option<IpAddr>,
        hash: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refused> {
        let (tx, rx) = futures_channel::oneshot::channel();
        let job: Job = Box::new(move |expired| {
            let _ = tx.send(if expired {
                Err(Refused::Busy)
            } else {
                Ok(hash())
            });
        });
        let address = peer.map_or(UNKNOWN, key);
        {
            let mut q = self.shared.lock();
            if q.closed {
                return Err(Refused::Closed);
            }
            if q.queued >= self.caps.1 {
                return Err(Refused::Busy);
            }
            let mine = q.by_address.entry(address).or_default();
            if mine.len() >= self.caps.0 {
                return Err(Refused::Busy);
            }
            let first = mine.is_empty();
            mine.push_back(Queued {
                job,
                deadline: Instant::now() + self.max_wait,
            });
            if first {
                q.ring.push_back(address);
            }
            q.queued += 1;
        }
        self.shared.ready.notify_one();
        rx.await.unwrap_or(Err(Refused::Closed))
    }
}

/// A thread's loop: the next address's oldest hash, until closed and empty.
fn work(shared: &Shared) {
    loop {
        let next = {
            let mut q = shared.lock();
            loop {
                if let Some(job) = take(&mut q) {
                    break Some(job);
                }
                if q.closed {
                    break None;
                }
                q = shared.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let Some(Queued { job, deadline }) = next else {
            return;
        };
        job(Instant::now() > deadline);
    }
}

/// Takes the oldest hash of the address whose turn it is.
fn take(q: &mut Queues) -> Option<Queued> {
    let address = q.ring.pop_front()?;
    let mine = q.by_address.get_mut(&address)?;
    let job = mine.pop_front();
    if mine.is_empty() {
        q.by_address.remove(&address);
    } else {
        q.ring.push_back(address);
    }
    if job.is_some() {
        q.queued -= 1;
    }
    job
}

impl Drop for FairPool {
    /// Refuses what is queued, then lets the threads finish what they hold.
    fn drop(&mut self) {
        let refused: Vec<Queued> = {
            let mut q = self.shared.lock();
            q.closed = true;
            q.ring.clear();
            q.queued = 0;
            q.by_address.drain().flat_map(|(_, v)| v).collect()
        };
        for r in refused {
            drop(r.job); // its sender dropped: the waiter gets Closed
        }
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("ip"))
    }

    /// Opens on drop: a test that fails while a hash is held still lets
    /// the pool's thread go, so it fails instead of hanging.
    struct Gate(Arc<AtomicBool>);

    impl Drop for Gate {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Waits (at most 10 s) until the pool holds `n` queued hashes: a
    /// loaded machine may start the waiters' threads late.
    fn until_queued(pool: &FairPool, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.shared.lock().queued < n {
            assert!(Instant::now() < deadline, "{n} hashes never queued");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// One thread, held busy; then a flood from one address and one hash
    /// from another: the other is served second, not after the flood.
    #[test]
    fn another_address_is_served_before_a_flood_ends() {
        let pool = Arc::new(FairPool::new(1, "t", Duration::from_secs(60)).expect("pool"));
        let (order_tx, order_rx) = mpsc::channel();
        let gate = Gate(Arc::new(AtomicBool::new(false)));
        let hold = {
            let (pool, gate) = (pool.clone(), gate.0.clone());
            std::thread::spawn(move || {
                pollster::block_on(pool.run(ip("10.0.0.1"), move || {
                    while !gate.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }))
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let mut waiters = Vec::new();
        for i in 0..20 {
            let (pool, tx) = (pool.clone(), order_tx.clone());
            waiters.push(std::thread::spawn(move || {
                pollster::block_on(pool.run(ip("10.0.0.1"), move || {
                    let _ = tx.send(format!("flood {i}"));
                }))
            }));
        }
        // The held hash and the flood are queued before the other comes.
        until_queued(&pool, 20);
        {
            let (pool, tx) = (pool.clone(), order_tx.clone());
            waiters.push(std::thread::spawn(move || {
                pollster::block_on(pool.run(ip("10.0.0.2"), move || {
                    let _ = tx.send("other".to_string());
                }))
            }));
        }
        std::thread::sleep(Duration::from_millis(50));
        drop(gate);
        assert_eq!(hold.join().expect("join"), Ok(()));
        for w in waiters {
            assert_eq!(w.join().expect("join"), Ok(()));
        }
        drop(order_tx);
        let order: Vec<String> = order_rx.iter().collect();
        let at = order.iter().position(|o| o == "other").expect("served");
        assert!(at <= 1, "served at {at} of {}: {order:?}", order.len());
    }

    /// Past its share an address is refused at once, and a hash that
    /// waited past the bound is refused without being done.
    #[test]
    fn waits_are_bounded() {
        const SHARE: usize = 16;
        let pool = Arc::new(
            FairPool::new(1, "t", Duration::from_millis(100))
                .expect("pool")
                .with_caps(SHARE, 1000),
        );
        let gate = Gate(Arc::new(AtomicBool::new(false)));
        let (held_tx, held) = mpsc::channel();
        let hold = {
            let (pool, gate) = (pool.clone(), gate.0.clone());
            std::thread::spawn(move || {
                pollster::block_on(pool.run(ip("10.0.0.9"), move || {
                    let _ = held_tx.send(());
                    while !gate.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }))
            })
        };
        held.recv_timeout(Duration::from_secs(10))
            .expect("the pool's thread takes the held hash");
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waiters: Vec<_> = (0..SHARE)
            .map(|_| {
                let (pool, done) = (pool.clone(), done.clone());
                std::thread::spawn(move || {
                    pollster::block_on(pool.run(ip("10.0.0.1"), move || {
                        done.fetch_add(1, Ordering::SeqCst);
                    }))
                })
            })
            .collect();
        until_queued(&pool, SHARE);
        let over = pollster::block_on(pool.run(ip("10.0.0.1"), || ()));
        assert_eq!(over, Err(Refused::Busy), "past the address's share");
        std::thread::sleep(Duration::from_millis(150));
        drop(gate);
        hold.join().expect("join").expect("held hash done");
        for w in waiters {
            assert_eq!(w.join().expect("join"), Err(Refused::Busy));
        }
        assert_eq!(done.load(Ordering::SeqCst), 0, "expired hashes not done");
        assert_eq!(pollster::block_on(pool.run(ip("10.0.0.1"), || 7)), Ok(7));
    }
}
