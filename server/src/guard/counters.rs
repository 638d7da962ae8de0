//! What the server counts about its clients: connections opened, refused
//! and closed (by reason), failed sign-ins, refused requests (by kind) and
//! bytes in and out. Atomics, relaxed: figures, not synchronisation.
//! Logged at shutdown; GET_STATS carries the ones Iggy has a field for.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed it (or reset it).
    ClientLeft,
    /// Not signed in within `--login-timeout`.
    LoginTimeout,
    /// Part of a request, then nothing for `--stall-timeout`.
    Stalled,
    /// A request not whole within its deadline (`--request-timeout`).
    TooSlow,
    /// A header whose size cannot frame a request (too small or over
    /// `--max-request-bytes`).
    Framing,
    /// `--max-failed-logins` failed sign-ins.
    LoginFailures,
    /// The TLS handshake or a record failed.
    Tls,
    /// A read or write failed.
    Io,
    /// The server is stopping.
    Shutdown,
    /// A login Iggy's server answers with an eviction
    /// (`wire/eviction.rs`).
    Evicted,
    /// A consumer-group member silent past the heartbeat threshold.
    Stale,
}

impl CloseReason {
    /// Every reason, in the order of [`Counters::closed`].
    pub const ALL: [CloseReason; 11] = [
        CloseReason::ClientLeft,
        CloseReason::LoginTimeout,
        CloseReason::Stalled,
        CloseReason::TooSlow,
        CloseReason::Framing,
        CloseReason::LoginFailures,
        CloseReason::Tls,
        CloseReason::Io,
        CloseReason::Shutdown,
        CloseReason::Evicted,
        CloseReason::Stale,
    ];

    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::ClientLeft => "client_left",
            CloseReason::LoginTimeout => "login_timeout",
            CloseReason::Stalled => "stalled",
            CloseReason::TooSlow => "too_slow",
            CloseReason::Framing => "framing",
            CloseReason::LoginFailures => "login_failures",
            CloseReason::Tls => "tls",
            CloseReason::Io => "io",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Evicted => "evicted",
            CloseReason::Stale => "stale",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over `--max-request-bytes`.
    TooLarge,
    /// A header or payload that is not a request.
    Malformed,
    /// Before sign-in.
    Unauthenticated,
    /// A send whose batch was refused (admission, routing).
    Send,
    /// Any other error status.
    Other,
}

impl Refusal {
    /// Every kind, in the order of [`Counters::refused`].
    pub const ALL: [Refusal; 5] = [
        Refusal::TooLarge,
        Refusal::Malformed,
        Refusal::Unauthenticated,
        Refusal::Send,
        Refusal::Other,
    ];

    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::TooLarge => "too_large",
            Refusal::Malformed => "malformed",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::Send => "send",
            Refusal::Other => "other",
        }
    }
}

/// The counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections accepted and served.
    pub opened: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections closed at once: `--max-connections` reached.
    pub refused: AtomicU64,
    closed: [AtomicU64; 11],
    /// Sign-ins refused: wrong credentials.
    pub logins_failed: AtomicU64,
    /// Sign-ins refused unchecked: the peer address was throttled.
    pub logins_throttled: AtomicU64,
    /// Hashes refused undone: the hashing pool was busy (the address's
    /// share or the whole queue full, or a wait past its bound).
    pub hashes_busy: AtomicU64,
    refusals: [AtomicU64; 5],
    /// Bytes read from clients.
    pub bytes_in: AtomicU64,
    /// Bytes written to clients.
    pub bytes_out: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// see [`Counters::opened`]
    pub opened: u64,
    /// see [`Counters::open`]
    pub open: u64,
    /// see [`Counters::refused`]
    pub refused: u64,
    /// closed connections by reason, in [`CloseReason::ALL`]'s order
    pub closed: [u64; 11],
    /// see [`Counters::logins_failed`]
    pub logins_failed: u64,
    /// see [`Counters::logins_throttled`]
    pub logins_throttled: u64,
    /// see [`Counters::hashes_busy`]
    pub hashes_busy: u64,
    /// refused requests by kind, in [`Refusal::ALL`]'s order
    pub refusals: [u64; 5],
    /// see [`Counters::bytes_in`]
    pub bytes_in: u64,
    /// see [`Counters::bytes_out`]
    pub bytes_out: u64,
}

impl Counters {
    /// Counts a connection closed for `reason`.
    pub fn closed(&self, reason: CloseReason) {
        self.closed[reason.index()].fetch_add(1, Ordering::Relaxed);
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts a refused request.
    pub fn refused(&self, kind: Refusal) {
        self.refusals[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> CountersSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CountersSnapshot {
            opened: get(&self.opened),
            open: get(&self.open),
            refused: get(&self.refused),
            closed: self.closed.each_ref().map(get),
            logins_failed: get(&self.logins_failed),
            logins_throttled: get(&self.logins_throttled),
            hashes_busy: get(&self.hashes_busy),
            refusals: self.refusals.each_ref().map(get),
            bytes_in: get(&self.bytes_in),
            bytes_out: get(&self.bytes_out),
        }
    }
}

impl CountersSnapshot {
    /// Connections closed for `reason`.
    pub fn closed_for(&self, reason: CloseReason) -> u64 {
        self.closed[reason.index()]
    }

    /// Requests refused as `kind`.
    pub fn refused_as(&self, kind: Refusal) -> u64 {
        self.refusals[kind as usize]
    }
}

impl std::fmt::Display for CountersSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connections opened {} open {} refused {}; closed",
            self.opened, self.open, self.refused
        )?;
        for r in CloseReason::ALL {
            write!(f, " {}={}", r.name(), self.closed_for(r))?;
        }
        write!(
            f,
            "; logins failed {} throttled {}; hashes refused busy {}; requests refused",
            self.logins_failed, self.logins_throttled, self.hashes_busy
        )?;
        for k in Refusal::ALL {
            write!(f, " {}={}", k.name(), self.refused_as(k))?;
        }
        write!(f, "; bytes in {} out {}", self.bytes_in, self.bytes_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shutdown line names each reason and kind with its own count:
    /// each name distinct, in snake case, next to the count kept for it.
    #[test]
    fn the_summary_names_every_count() {
        let mut snap = CountersSnapshot {
            opened: 0,
            open: 0,
            refused: 0,
            closed: [0; 11],
            logins_failed: 0,
            logins_throttled: 0,
            hashes_busy: 0,
            refusals: [0; 5],
            bytes_in: 0,
            bytes_out: 0,
        };
        for (i, n) in snap.closed.iter_mut().enumerate() {
            *n = 100 + i as u64;
        }
        for (i, n) in snap.refusals.iter_mut().enumerate() {
            *n = 200 + i as u64;
        }
        let line = snap.to_string();
        let mut names = std::collections::HashSet::new();
        for r in CloseReason::ALL {
            let name = r.name();
            assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert!(names.insert(name), "{name} twice");
            let entry = format!(" {name}={}", snap.closed_for(r));
            assert!(line.contains(&entry), "{entry} not in {line}");
        }
        for k in Refusal::ALL {
            let name = k.name();
            assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert!(names.insert(name), "{name} twice");
            let entry = format!(" {name}={}", snap.refused_as(k));
            assert!(line.contains(&entry), "{entry} not in {line}");
        }
        assert_eq!(snap.closed_for(CloseReason::Stale), 110);
        assert_eq!(snap.refused_as(Refusal::TooLarge), 200);
    }
}
