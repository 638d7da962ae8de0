//! `--reopen`: what opening the data directory costs after the run, with
//! every partition opened before `Engine::open` returns
//! (`OpenPartitions::AtOpen`): first as the clean shutdown left it (each
//! partition's clean-close record trusted), then with the records removed,
//! as a crash leaves a directory (each partition recovered by scanning its
//! tail and syncing).

use corelog::{CleanClose, Config, Engine, LogConfig, OpenPartitions};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// One reopen: how long `Engine::open` took and what recovery did.
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    pub ms: f64,
    pub partitions: usize,
    /// Partitions opened from their clean-close record.
    pub trusted: usize,
    pub batches_verified: u64,
}

/// Both reopens.
#[derive(Debug, Clone, Copy)]
pub struct Reopen {
    pub clean: Opened,
    pub scanned: Opened,
}

impl Reopen {
    pub fn print(&self) {
        for (what, o) in [
            ("after the clean shutdown", self.clean),
            (
                "without clean-close records (as after a crash)",
                self.scanned,
            ),
        ] {
            println!(
                "reopen {what}: {} partitions in {:.1} ms ({} trusted their record, {} batches verified)",
                o.partitions, o.ms, o.trusted, o.batches_verified
            );
        }
    }

    pub fn json(&self) -> Value {
        let one = |o: Opened| {
            json!({
                "ms": o.ms,
                "partitions": o.partitions,
                "trusted": o.trusted,
                "batches_verified": o.batches_verified,
            })
        };
        json!({ "clean": one(self.clean), "scanned": one(self.scanned) })
    }
}

/// Reopens `dir` twice (see the module doc); the engine is shut down each
/// time.
pub fn measure(dir: &Path, shards: usize, log: &LogConfig) -> Result<Reopen, String> {
    let clean = open_all(dir, shards, log)?;
    let parts = dir.join("partitions");
    let entries = std::fs::read_dir(&parts).map_err(|e| format!("{}: {e}", parts.display()))?;
    for e in entries.flatten() {
        let record = e.path().join(corelog::testing::segment::log::CLEAN_RECORD);
        match std::fs::remove_file(&record) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", record.display())),
        }
    }
    let scanned = open_all(dir, shards, log)?;
    Ok(Reopen { clean, scanned })
}

fn open_all(dir: &Path, shards: usize, log: &LogConfig) -> Result<Opened, String> {
    let start = Instant::now();
    let engine = Engine::open(Config {
        shards: Some(shards),
        log: log.clone(),
        open_partitions: OpenPartitions::AtOpen,
        ..Config::new(dir)
    })
    .map_err(|e| format!("reopen: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let mut o = Opened {
        ms,
        partitions: engine.recovery().len(),
        trusted: 0,
        batches_verified: 0,
    };
    for r in engine.recovery() {
        let report = r.result.as_ref().map_err(|e| format!("reopen: {e}"))?;
        o.trusted += usize::from(report.clean_close == CleanClose::Trusted);
        o.batches_verified += report.batches_verified;
    }
    engine.shutdown().map_err(|e| format!("reopen: {e}"))?;
    Ok(o)
}
