//! `write`: appends to partitions 1..=N through the engine until the time
//! is up, journaling every acknowledgement the moment it arrives.

use crate::args::WriteArgs;
use crate::journal::{ack_line, now_ns, sent_line};
use crate::stream::producer_batch;
use corelog::{AppendAck, Engine, Handle, Reply};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one partition's producer did.
struct Produced {
    sent: u64,
    acked: u64,
}

pub(crate) fn run(a: &WriteArgs) -> Result<String, String> {
    let journal = File::options()
        .create(true)
        .append(true)
        .open(&a.common.journal)
        .map_err(|e| format!("opening the journal {}: {e}", a.common.journal.display()))?;
    let journal = Mutex::new(journal);
    let engine = Engine::open(a.common.config(a.common.fsync))
        .map_err(|e| format!("opening {}: {e}", a.common.dir.display()))?;
    let deadline = Instant::now() + Duration::from_secs_f64(a.seconds);
    let results: Vec<Result<Produced, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (1..=a.common.partitions)
            .map(|p| {
                let handle = engine.handle();
                let journal = &journal;
                s.spawn(move || produce(&handle, p, a, deadline, journal))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a producer panicked".into()))
            })
            .collect()
    });
    let shutdown = engine.shutdown();
    let (mut sent, mut acked) = (0, 0);
    for r in results {
        let r = r?;
        sent += r.sent;
        acked += r.acked;
    }
    shutdown.map_err(|e| format!("shutting down: {e}"))?;
    Ok(format!(
        "corelog-powercut write: fsync={} partitions={} sent={sent} acknowledged={acked}",
        a.common.fsync, a.common.partitions
    ))
}

/// Appends batch after batch to `p` with up to `window` in flight, paced
/// to `rate` per second; journals each acknowledgement, then what was sent.
fn produce(
    handle: &Handle,
    p: u64,
    a: &WriteArgs,
    deadline: Instant,
    journal: &Mutex<File>,
) -> Result<Produced, String> {
    let started = Instant::now();
    let mut inflight: VecDeque<(u64, u64, Reply<AppendAck>)> = VecDeque::new();
    let mut seq = 0u64;
    let mut acked = 0u64;
    loop {
        let now = Instant::now();
        let running = now < deadline;
        let allowed = match a.rate {
            0 => u64::MAX,
            r => (now - started).as_secs_f64().mul_add(r as f64, 1.0) as u64,
        };
        if running && inflight.len() < a.window.max(1) && seq < allowed {
            let bytes = producer_batch(p, seq);
            let digest = xxhash_rust::xxh3::xxh3_64(&bytes);
            inflight.push_back((seq, digest, handle.append(p, bytes)));
            seq += 1;
            continue;
        }
        let Some((s, digest, reply)) = inflight.pop_front() else {
            if !running {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let ack = reply
            .wait()
            .map_err(|e| format!("partition {p}: append of batch {s}: {e}"))?;
        record(journal, &ack_line(p, s, ack.base_offset, digest, now_ns()))?;
        acked += 1;
    }
    record(journal, &sent_line(p, seq))?;
    Ok(Produced { sent: seq, acked })
}

/// Writes one line with one `write` call.
fn record(journal: &Mutex<File>, line: &str) -> Result<(), String> {
    let mut j = journal
        .lock()
        .map_err(|_| "the journal's lock is poisoned".to_string())?;
    j.write_all(line.as_bytes())
        .map_err(|e| format!("writing the journal: {e}"))
}
