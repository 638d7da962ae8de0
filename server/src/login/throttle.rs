//! Failed logins per peer address: a token bucket each. A wrong password
//! costs its address a token; an address with no token left is refused
//! without a check. The bucket is asked when the attempt arrives and again
//! when its check is about to run on the login pool (the attempts of one
//! address queued meanwhile see the failures before them), so wrong
//! passwords from one address cost at most `burst` checks and then `rate`
//! a second, whatever the number of connections they come over; right
//! passwords cost nothing. Other addresses keep their own buckets.

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

    /// Whether `ip` may have its password checked now (a token is left).
    pub fn allows(&self, ip: IpAddr, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        match buckets.get_mut(&ip) {
            None => true,
            Some(b) => {
                b.tokens = refilled(b, now, self.burst, self.rate);
                b.at = now;
                b.tokens >= 1.0
            }
        }
    }

    /// Charges `ip` a token for a failed sign-in.
    pub fn charge(&self, ip: IpAddr, now: Instant) {
        let _ = self.take(ip, now);
    }

    /// Takes a token from `ip`'s bucket; false when none is left.
    fn take(&self, ip: IpAddr, now: Instant) -> bool {
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
        for _ in 0..3 {
            assert!(t.allows(a, t0));
            t.charge(a, t0);
        }
        assert!(!t.allows(a, t0), "burst spent");
        assert!(t.allows(b, t0), "another address has its own bucket");
        assert!(
            !t.allows(a, t0 + Duration::from_millis(400)),
            "0.8 of a token"
        );
        assert!(
            t.allows(a, t0 + Duration::from_millis(500)),
            "a token after 0.5 s"
        );
        t.charge(a, t0 + Duration::from_millis(500));
        assert!(!t.allows(a, t0 + Duration::from_millis(500)));
    }
}
