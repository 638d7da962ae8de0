//! Sign-in under attack: every argon2 hash (checks, right or wrong, and new
//! hashes) on one pool served fairly by peer address, with bounded waits
//! ([`fair`]), failed attempts per peer address throttled ([`throttle`]),
//! and their log lines rate-limited ([`log_limit`]). The per-connection limit of
//! failures is the connection's (it closes after `max_failed_logins`).

pub mod fair;
pub mod log_limit;
pub mod throttle;

use fair::{FairPool, Refused};
use log_limit::LogLimit;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use throttle::LoginThrottle;

/// How a login attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The credentials are right.
    SignedIn,
    /// Checked and wrong.
    Wrong,
    /// Not checked: the peer address has no attempt left for now.
    Throttled,
    /// Not checked: too many hashes queued (for the address, or in all),
    /// or it waited past [`MAX_HASH_WAIT`]; the client may try again.
    Busy,
    /// Not checked: the server is shutting down.
    Unavailable,
}

/// The longest a hash waits for a thread before it is refused, not done.
pub const MAX_HASH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The sign-in machinery shared by every connection.
#[derive(Debug)]
pub struct Logins {
    pool: FairPool,
    throttle: Arc<LoginThrottle>,
    log: LogLimit,
}

/// Failure lines written a second at most.
const FAILURE_LINES_PER_SECOND: u32 = 5;

impl Logins {
    /// `threads` checking passwords; each peer address may fail `burst`
    /// times at once, then `rate` times a second.
    pub fn new(threads: usize, burst: u32, rate: f64) -> std::io::Result<Logins> {
        Ok(Logins {
            pool: FairPool::new(threads, "corelog-login", MAX_HASH_WAIT)?,
            throttle: Arc::new(LoginThrottle::new(burst, rate)),
            log: LogLimit::new(FAILURE_LINES_PER_SECOND),
        })
    }

    /// Runs `work` (slow: hashing a new password or token) on the pool in
    /// `peer`'s turn; not throttled (no guess is checked).
    pub async fn run<T: Send + 'static>(
        &self,
        peer: Option<IpAddr>,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refused> {
        self.pool.run(peer, work).await
    }

    /// Runs `check` (slow: a password hash) on the pool, unless `peer` is
    /// throttled; logs a failure (rate-limited) naming `peer` and `who`.
    pub async fn attempt(
        &self,
        peer: Option<IpAddr>,
        who: &str,
        check: impl FnOnce() -> bool + Send + 'static,
    ) -> Attempt {
        let allowed = move |t: &LoginThrottle| peer.is_none_or(|ip| t.allows(ip, Instant::now()));
        let outcome = if allowed(&self.throttle) {
            let throttle = self.throttle.clone();
            let checked = self.pool.run(peer, move || {
                // Asked again: failures queued before this one count.
                if !allowed(&throttle) {
                    return Attempt::Throttled;
                }
                if check() {
                    return Attempt::SignedIn;
                }
                if let Some(ip) = peer {
                    throttle.charge(ip, Instant::now());
                }
                Attempt::Wrong
            });
            match checked.await {
                Ok(a) => a,
                Err(Refused::Busy) => Attempt::Busy,
                Err(Refused::Closed) => Attempt::Unavailable,
            }
        } else {
            Attempt::Throttled
        };
        match outcome {
            Attempt::Throttled => {
                self.log_failure(peer, who, "too many failed sign-ins from this address");
            }
            Attempt::Wrong => self.log_failure(peer, who, "wrong username or password"),
            Attempt::Busy => self.log_failure(peer, who, "the hashing pool is busy"),
            _ => {}
        }
        outcome
    }

    fn log_failure(&self, peer: Option<IpAddr>, who: &str, why: &str) {
        let Some(left_out) = self.log.allow(Instant::now()) else {
            return;
        };
        let peer = peer.map(|p| p.to_string()).unwrap_or_else(|| "?".into());
        if left_out > 0 {
            tracing::warn!("refused sign-in of {who:?} from {peer}: {why} ({left_out} more failures not logged)");
        } else {
            tracing::warn!("refused sign-in of {who:?} from {peer}: {why}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn attempts(
        logins: &Arc<Logins>,
        n: usize,
        right: bool,
        checks: &Arc<AtomicUsize>,
    ) -> Vec<Attempt> {
        let ip: IpAddr = "127.0.0.2".parse().expect("ip");
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (logins, checks) = (logins.clone(), checks.clone());
                std::thread::spawn(move || {
                    pollster::block_on(logins.attempt(Some(ip), "x", move || {
                        checks.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        right
                    }))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("join"))
            .collect()
    }

    #[test]
    fn concurrent_wrong_passwords_from_one_address_cost_at_most_its_burst_right_ones_nothing() {
        let logins = Arc::new(Logins::new(1, 3, 0.001).expect("logins"));
        let checks = Arc::new(AtomicUsize::new(0));
        let right = attempts(&logins, 20, true, &checks);
        assert!(right.iter().all(|a| *a == Attempt::SignedIn), "{right:?}");
        checks.store(0, Ordering::SeqCst);
        let wrong = attempts(&logins, 20, false, &checks);
        assert_eq!(
            checks.load(Ordering::SeqCst),
            3,
            "checks run for one address"
        );
        assert_eq!(wrong.iter().filter(|a| **a == Attempt::Wrong).count(), 3);
        assert_eq!(
            wrong.iter().filter(|a| **a == Attempt::Throttled).count(),
            17
        );
    }
}
