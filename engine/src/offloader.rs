//! The offloader thread (`Config::tier`): an offload pass
//! (`Handle::offload_pass`) every `TierConfig::upload_every`, until the
//! engine stops it; and what a pass asks of a shard and reports.

use corelog_segment::log::{Retention, SealedSegment};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a shard tells the offloader of one partition.
#[derive(Debug, Clone)]
pub(crate) struct Offloadable {
    pub sealed: Vec<SealedSegment>,
    pub retention: Retention,
    pub first_offset: u64,
    pub bytes: u64,
}

/// What one pass over every partition did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffloadReport {
    /// Segments copied to the store and committed.
    pub uploaded: usize,
    /// Local segment files removed (the store holds them).
    pub trimmed: usize,
    /// Sealed segments still waiting to be copied.
    pub backlog_segments: u64,
    /// Their bytes.
    pub backlog_bytes: u64,
    /// Partitions whose pass failed, with why (the store unreachable...).
    pub failed: Vec<(u64, String)>,
}

/// The offloader thread and how to stop it.
#[derive(Debug)]
pub(crate) struct Offloader {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Offloader {
    /// Starts the thread: `pass` every `upload_every`.
    pub(crate) fn start(
        pass: impl Fn() -> OffloadReport + Send + 'static,
        every: Duration,
    ) -> std::io::Result<Offloader> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let told = stop.clone();
        let thread = std::thread::Builder::new()
            .name("corelog-offload".into())
            .spawn(move || loop {
                let (flag, wake) = &*told;
                let stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
                let (stopped, _) = wake
                    .wait_timeout_while(stopped, every, |s| !*s)
                    .unwrap_or_else(|p| p.into_inner());
                if *stopped {
                    return;
                }
                drop(stopped);
                let report = pass();
                for (p, why) in &report.failed {
                    tracing::warn!(
                        "tier: partition {p}: {why} (backlog: {} segments, {} bytes)",
                        report.backlog_segments,
                        report.backlog_bytes
                    );
                }
            })?;
        Ok(Offloader {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread after the pass it is in.
    pub(crate) fn stop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
