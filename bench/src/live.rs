//! What a run's threads share while it goes: the sampler's counters,
//! where each partition ends, the throughput samples.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::OnceLock;

/// Counters the sampler reads while the run goes.
#[derive(Debug, Default)]
pub struct Live {
    pub stop: AtomicBool,
    pub claimed: AtomicU64,
    pub appended: AtomicU64,
    pub polled: AtomicU64,
}

/// Where each partition ends once producers are done.
#[derive(Debug, Default)]
pub struct Totals {
    pub targets: OnceLock<HashMap<u64, u64>>,
}

impl Totals {
    pub fn target(&self, p: u64) -> Option<u64> {
        self.targets.get().and_then(|t| t.get(&p).copied())
    }
}

/// Throughput samples: (seconds since start, bytes appended, bytes polled).
pub type Series = Vec<(f64, u64, u64)>;
