//! What every thread of a TCP run shares: where the server is, the run's
//! clock and budget, and what producers sent.

use super::client::Client;
use crate::live::Live;
use iggy_binary_protocol::WireIdentifier;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

pub const STREAM: &str = "bench-stream-1";
pub const TOPIC: &str = "topic-1";

pub fn named(s: &str) -> Result<WireIdentifier, String> {
    WireIdentifier::named(s).map_err(|e| e.to_string())
}

/// Where the server is and who signs in.
#[derive(Debug, Clone)]
pub struct Login {
    pub addr: String,
    pub username: String,
    pub password: String,
}

impl Login {
    pub fn connect(&self) -> Result<Client, String> {
        Client::connect(&self.addr, &self.username, &self.password)
            .map_err(|e| format!("connect to {}: {e}", self.addr))
    }

    /// `n` connections, signed in side by side (a sign-in costs the
    /// server a password hash), before any schedule starts.
    pub fn connect_many(&self, n: usize) -> Result<Vec<Client>, String> {
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let login = self.clone();
                std::thread::spawn(move || login.connect())
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| "a connecting thread panicked".to_string())?
            })
            .collect()
    }
}

/// What every thread of the run shares.
pub struct Shared {
    pub login: Login,
    pub live: Live,
    pub go_at: Instant,
    pub measure_from: Instant,
    pub total: Option<u64>,
    /// Messages acknowledged per partition (warm-up included).
    pub sent: Vec<AtomicU64>,
}

impl Shared {
    pub fn connect(&self) -> Result<Client, String> {
        self.login.connect()
    }
}
