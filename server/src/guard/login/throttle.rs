//! Failed logins per peer address: a token bucket each. A wrong password
//! costs its address a token; an address with no token left is refused
//! without a check. The bucket is asked when the attempt arrives and again
//! when its check is about to run on the login pool (the attempts of one
//! address queued meanwhile see the failures before them), so wrong
//! passwords from one address cost at most `burst` checks and then `rate`
//! a second, whatever the number of connections they come over; right
//! passwords cost nothing. Other addresses keep their own buckets.
//!
//! An IPv6 address is keyed by its /64 (what one host or one customer
//! usually gets, so a host cannot draw fresh buckets from its own
//! prefix), an IPv4-mapped one by its IPv4 address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Addresses tracked at most. Past it, full buckets are forgotten; if
/// every bucket is in use (a flood from that many addresses), the one with
/// the most tokens left is (the least throttled), never the others: an
/// address that spent its burst keeps its empty bucket.
const MAX_TRACKED: usize = 65_536;

/// The key of `ip`'s bucket: an IPv4 address itself, an IPv6 one its /64.
pub fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::V6(octets.into())
            }
        },
    }
}

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
        let ip = key(ip);
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
        let ip = key(ip);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&ip) {
            let (burst, rate) = (self.burst, self.rate);
            buckets.retain(|_, b| refilled(b, now, burst, rate) < burst);
            if buckets.len() >= MAX_TRACKED {
                let fullest = buckets
                    .iter()
                    .max_by(|a, b| {
                        refilled(a.1, now, burst, rate).total_cmp(&refilled(b.1, now, burst, rate))
                    })
                    .map(|(k, _)| *k);
                if let Some(k) = fullest {
                    buckets.remove(&k);
                }
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
    fn an_ipv6_slash_64_shares_one_bucket_and_a_mapped_ipv4_is_its_ipv4() {
        let t = LoginThrottle::new(2, 0.0);
        let t0 = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().expect("ip");
        let same_64: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:fffe".parse().expect("ip");
        let other_64: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        t.charge(a, t0);
        t.charge(same_64, t0);
        assert!(!t.allows(a, t0), "the /64 spent its burst");
        assert!(!t.allows(same_64, t0));
        assert!(t.allows(other_64, t0), "another /64 has its own bucket");
        let v4: IpAddr = "192.0.2.7".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        t.charge(v4, t0);
        t.charge(mapped, t0);
        assert!(!t.allows(v4, t0), "mapped and plain share a bucket");
    }

    #[test]
    fn a_full_table_evicts_the_least_throttled_never_an_empty_bucket() {
        let t = LoginThrottle::new(2, 0.0);
        let t0 = Instant::now();
        let spent: IpAddr = "198.51.100.1".parse().expect("ip");
        t.charge(spent, t0);
        t.charge(spent, t0);
        // Fill the table with addresses that failed once (a token left).
        for i in 0..MAX_TRACKED as u32 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            t.charge(ip, t0);
        }
        assert!(
            !t.allows(spent, t0),
            "an address that spent its burst is still throttled after a flood of others"
        );
        let len = t.buckets.lock().expect("lock").len();
        assert!(len <= MAX_TRACKED, "bounded: {len}");
    }

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
