//! What every thread of a TCP run shares: where the server is, the run's
//! clock and budget, and what producers sent.

use super::client::Client;
use crate::Live;
use iggy_binary_protocol::WireIdentifier;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

pub const STREAM: &str = "bench-stream-1";
pub const TOPIC: &str = "topic-1";

pub fn named(s: &str) -> Result<WireIdentifier, String> {
    WireIdentifier::named(s).map_err(|e| e.to_string())
}

/// What every thread of the run shares.
pub struct Shared {
    pub addr: String,
    pub username: String,
    pub password: String,
    pub live: Live,
    pub go_at: Instant,
    pub measure_from: Instant,
    pub total: Option<u64>,
    /// Messages acknowledged per partition (warm-up included).
    pub sent: Vec<AtomicU64>,
}

impl Shared {
    pub fn connect(&self) -> Result<Client, String> {
        Client::connect(&self.addr, &self.username, &self.password)
            .map_err(|e| format!("connect to {}: {e}", self.addr))
    }
}
