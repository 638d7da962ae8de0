//! Sign-in under attack: password checks on a bounded pool
//! ([`crate::pool`]),
//! failed attempts per peer address throttled ([`throttle`]), and their
//! log lines rate-limited ([`log_limit`]). The per-connection limit of
//! failures is the connection's (it closes after `max_failed_logins`).

pub mod log_limit;
pub mod throttle;

use crate::pool::BlockingPool;
use log_limit::LogLimit;
use std::net::IpAddr;
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
    /// Not checked: the server is shutting down.
    Unavailable,
}

/// The sign-in machinery shared by every connection.
#[derive(Debug)]
pub struct Logins {
    pool: BlockingPool,
    throttle: LoginThrottle,
    log: LogLimit,
}

/// Failure lines written a second at most.
const FAILURE_LINES_PER_SECOND: u32 = 5;

impl Logins {
    /// `threads` checking passwords; each peer address may fail `burst`
    /// times at once, then `rate` times a second.
    pub fn new(threads: usize, burst: u32, rate: f64) -> std::io::Result<Logins> {
        Ok(Logins {
            pool: BlockingPool::new(threads, "corelog-login")?,
            throttle: LoginThrottle::new(burst, rate),
            log: LogLimit::new(FAILURE_LINES_PER_SECOND),
        })
    }

    /// Threads checking passwords.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Runs `work` (slow: hashing a new password or token) on the pool,
    /// unthrottled; `None` if the pool is shutting down.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.pool.run(work).await
    }

    /// Runs `check` (slow: a password hash) on the pool, unless `peer` is
    /// throttled; logs a failure (rate-limited) naming `peer` and `who`.
    pub async fn attempt(
        &self,
        peer: Option<IpAddr>,
        who: &str,
        check: impl FnOnce() -> bool + Send + 'static,
    ) -> Attempt {
        if let Some(ip) = peer {
            if !self.throttle.take(ip, Instant::now()) {
                self.log_failure(peer, who, "too many failed sign-ins from this address");
                return Attempt::Throttled;
            }
        }
        let outcome = match self.pool.run(check).await {
            Some(true) => Attempt::SignedIn,
            Some(false) => Attempt::Wrong,
            None => Attempt::Unavailable,
        };
        match (outcome, peer) {
            (Attempt::SignedIn, Some(ip)) => self.throttle.refund(ip),
            (Attempt::Wrong, _) => self.log_failure(peer, who, "wrong username or password"),
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
