//! What one client, and all of them together, may hold: each a flag of
//! `corelog-server` with the default below (see the README's table).

use std::time::Duration;

/// Request bytes allowed beyond the largest batch: the 256-byte header and
/// a send's routing fields (two identifiers of at most 255 bytes, a
/// partitioning of at most 255, counts).
pub const REQUEST_OVERHEAD: u64 = 4096;

/// Largest request (header included) a connection may send before it signs
/// in: a LOGIN or a LOGIN_WITH_PERSONAL_ACCESS_TOKEN is a few hundred bytes
/// (four strings of at most 255 bytes each and their lengths), a PING
/// none. A larger one closes the connection as too large, so that no
/// connection holds more than this of `max_inflight_bytes` before sign-in.
pub const PRE_LOGIN_MAX_REQUEST: u64 = 4096;

/// The limits a server enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Connections served at once; past it a new one is closed at once.
    pub max_connections: usize,
    /// Connections served at once from one peer address (an IPv6 /64);
    /// past it a new one from there is closed at once.
    pub max_connections_per_address: usize,
    /// Largest request (header included). `None`: the engine's largest
    /// batch plus [`REQUEST_OVERHEAD`], which is also the most it can be.
    pub max_request_bytes: Option<u64>,
    /// Request bytes held by all connections together (read, or being
    /// served); a connection waits for room before reading more.
    pub max_inflight_bytes: u64,
    /// A connection that sent part of a request and then nothing for
    /// this long is closed.
    pub stall_timeout: Duration,
    /// A request must arrive whole within this of its first byte, plus
    /// one second per MiB it declares (so a client trickling bytes is
    /// closed too).
    pub request_timeout: Duration,
    /// A connection not signed in this long after it connected (or signed
    /// out) is closed.
    pub login_timeout: Duration,
    /// Threads checking passwords.
    pub login_concurrency: usize,
    /// Failed sign-ins after which a connection is closed.
    pub max_failed_logins: u32,
    /// Failed sign-ins one peer address may have at once ...
    pub login_failure_burst: u32,
    /// ... and then per second.
    pub login_failure_rate: f64,
    /// Iggy's heartbeat interval: a consumer-group member that sends
    /// nothing (no request, no PING) for 1.2 times it is evicted (an
    /// `Eviction(StaleClient)` frame, the connection closed) and its
    /// partitions dealt to the other members. Zero: never.
    pub heartbeat_interval: Duration,
    /// Consumers (and consumer groups) that may have a stored offset in
    /// one partition at once: a store for one more is refused until one is
    /// deleted (each is a file, and a client with the poll permission
    /// names consumers freely).
    pub max_consumer_offsets: usize,
    /// Consumer groups one topic may hold: a user that may read a topic
    /// may create groups in it, and each is in the catalog every change
    /// rewrites (and, in a cluster, replicates whole).
    pub max_consumer_groups: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            max_request_bytes: None,
            max_inflight_bytes: 256 << 20,
            stall_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            login_timeout: Duration::from_secs(10),
            login_concurrency: 1,
            max_failed_logins: 3,
            login_failure_burst: 10,
            login_failure_rate: 1.0,
            heartbeat_interval: Duration::from_secs(30),
            max_consumer_offsets: corelog::LogConfig::default().max_consumer_offsets,
            max_consumer_groups: 1_000,
        }
    }
}

/// Limits that cannot work together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// A request over the in-flight budget could never be read.
    #[error("--max-inflight-bytes {inflight} is below the largest request, {request} bytes (--max-request-bytes)")]
    InflightBelowRequest {
        /// the budget
        inflight: u64,
        /// the largest request
        request: u64,
    },
    /// Below the header, nothing could be read.
    #[error("--max-request-bytes {0} is below the 256-byte header")]
    RequestTooSmall(u64),
    /// A zero that would refuse everything.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
}

impl Limits {
    /// The largest request, given the engine's largest batch; checks that
    /// the limits fit together.
    pub fn resolve(&self, max_batch_bytes: u64) -> Result<u64, LimitsError> {
        let most = max_batch_bytes.saturating_add(REQUEST_OVERHEAD);
        let request = self.max_request_bytes.map_or(most, |r| r.min(most));
        if request < 256 {
            return Err(LimitsError::RequestTooSmall(request));
        }
        if self.max_inflight_bytes < request {
            return Err(LimitsError::InflightBelowRequest {
                inflight: self.max_inflight_bytes,
                request,
            });
        }
        if self.max_connections == 0 {
            return Err(LimitsError::Zero("--max-connections"));
        }
        if self.max_connections_per_address == 0 {
            return Err(LimitsError::Zero("--max-connections-per-address"));
        }
        if self.login_concurrency == 0 {
            return Err(LimitsError::Zero("--login-concurrency"));
        }
        if self.max_failed_logins == 0 {
            return Err(LimitsError::Zero("--max-failed-logins"));
        }
        if self.max_consumer_offsets == 0 {
            return Err(LimitsError::Zero("--max-consumer-offsets"));
        }
        if self.max_consumer_groups == 0 {
            return Err(LimitsError::Zero("--max-consumer-groups"));
        }
        Ok(request)
    }

    /// How long a consumer-group member may send nothing before it is
    /// evicted: 1.2 heartbeat intervals, as in Iggy's server; `None` when
    /// heartbeats are not checked.
    pub fn stale_after(&self) -> Option<Duration> {
        (!self.heartbeat_interval.is_zero()).then(|| self.heartbeat_interval.saturating_mul(6) / 5)
    }

    /// When a request of `payload` bytes whose first byte came at `first`
    /// must be whole.
    pub fn request_deadline(&self, first: std::time::Instant, payload: u64) -> std::time::Instant {
        first + self.request_timeout + Duration::from_secs(payload >> 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_limit_follows_the_largest_batch_and_must_fit_the_budget() {
        let l = Limits::default();
        assert_eq!(l.resolve(64 << 20), Ok((64 << 20) + REQUEST_OVERHEAD));
        let lower = Limits {
            max_request_bytes: Some(1 << 20),
            ..Limits::default()
        };
        assert_eq!(lower.resolve(64 << 20), Ok(1 << 20));
        let higher = Limits {
            max_request_bytes: Some(1 << 40),
            ..Limits::default()
        };
        assert_eq!(higher.resolve(1 << 20), Ok((1 << 20) + REQUEST_OVERHEAD));
        let tight = Limits {
            max_inflight_bytes: 1 << 20,
            ..Limits::default()
        };
        assert!(matches!(
            tight.resolve(64 << 20),
            Err(LimitsError::InflightBelowRequest { .. })
        ));
    }

    /// A consumer-group member is stale after 1.2 heartbeat intervals (as
    /// in Iggy's server), never when heartbeats are off; a request must be
    /// whole within the timeout plus a second per MiB it carries.
    #[test]
    fn staleness_and_request_deadlines_follow_their_settings() {
        let l = Limits {
            heartbeat_interval: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            ..Limits::default()
        };
        assert_eq!(l.stale_after(), Some(Duration::from_secs(6)));
        let off = Limits {
            heartbeat_interval: Duration::ZERO,
            ..Limits::default()
        };
        assert_eq!(off.stale_after(), None);
        let t = std::time::Instant::now();
        assert_eq!(l.request_deadline(t, 0), t + Duration::from_secs(10));
        assert_eq!(
            l.request_deadline(t, (3 << 20) + 5),
            t + Duration::from_secs(13)
        );
    }

    /// A request limit below the 256-byte header could read nothing: it is
    /// refused at start, and the header's own size is the least allowed.
    #[test]
    fn a_request_limit_below_the_header_is_refused() {
        let with = |bytes| Limits {
            max_request_bytes: Some(bytes),
            ..Limits::default()
        };
        assert_eq!(with(256).resolve(64 << 20), Ok(256));
        assert_eq!(
            with(255).resolve(64 << 20),
            Err(LimitsError::RequestTooSmall(255))
        );
        assert_eq!(
            with(1).resolve(64 << 20),
            Err(LimitsError::RequestTooSmall(1))
        );
    }
}
