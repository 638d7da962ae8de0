//! Failed logins per peer address: a token bucket each. Every attempt
//! takes a token before its password is checked and a right password gives
//! it back, so wrong passwords from one address cost at most `burst` checks
//! at once and `rate` a second after that, whatever the number of
//! connections they come over; an address with no token left is refused
//! without a check. Other addresses keep their own buckets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Addresses tracked at most. Past it, full buckets are forgotten; if
/// every bucket is in use (a flood from that many addresses) all are,
/// which bounds memory at the price of one fresh burst per address.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every address with recent failures.
#[derive(Debug)]
pub struct LoginThrottle {
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
    burst: f64,
    rate: f64,
}

impl LoginThrottle {
    /// Buckets of `burst` tokens refilled at `rate` a second.
    pub fn new(burst: u32, rate: f64) -> LoginThrottle {
        LoginThrottle {
            buckets: Mutex::new(HashMap::new()),
            burst: f64::from(burst.max(1)),
            rate: rate.max(0.0),
        }
    }

    /// Takes a token for a login attempt from `ip`; false when none is left.
    pub fn take(&self, ip: IpAddr, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&ip) {
            let (burst, rate) = (self.burst, self.rate);
            buckets.retain(|_, b| refilled(b, now, burst, rate) < burst);
            if buckets.len() >= MAX_TRACKED {
                buckets.clear();
            }
        }
        let bucket = buckets.entry(ip).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        bucket.tokens = refilled(bucket, now, self.burst, self.rate);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }

    /// Gives back the token of an attempt that signed in.
    pub fn refund(&self, ip: IpAddr) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = buckets.get_mut(&ip) {
            b.tokens = (b.tokens + 1.0).min(self.burst);
        }
    }
}

fn refilled(b: &Bucket, now: Instant, burst: f64, rate: f64) -> f64 {
    let secs = now.saturating_duration_since(b.at).as_secs_f64();
    (b.tokens + secs * rate).min(burst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_address_gets_its_burst_then_its_rate_and_others_are_untouched() {
        let t = LoginThrottle::new(3, 2.0);
        let (a, b): (IpAddr, IpAddr) = (
            "127.0.0.2".parse().expect("ip"),
            "10.0.0.1".parse().expect("ip"),
        );
        let t0 = Instant::now();
        assert!((0..3).all(|_| t.take(a, t0)));
        assert!(!t.take(a, t0), "burst spent");
        assert!(t.take(b, t0), "another address has its own bucket");
        assert!(
            !t.take(a, t0 + Duration::from_millis(400)),
            "0.8 of a token"
        );
        assert!(
            t.take(a, t0 + Duration::from_millis(500)),
            "one token after 0.5 s"
        );
        assert!(!t.take(a, t0 + Duration::from_millis(500)));
        t.refund(a);
        assert!(
            t.take(a, t0 + Duration::from_millis(500)),
            "a success gives its token back"
        );
    }
}
