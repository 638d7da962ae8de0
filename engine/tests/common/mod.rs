//! Helpers shared by the engine's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod stream;

use corelog::replication::ReplicaLog;
use corelog::{BatchBuilder, Config, Engine, LogConfig, MessageSpec};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Messages in batch `seq` of a stream: 1 to 4.
pub fn messages_in(seq: u64) -> u64 {
    1 + seq % 4
}

/// Producer batch `seq` of stream `tag`: `messages_in(seq)` messages whose
/// ids say `(tag, seq, index)` and whose payload sizes vary with `seq`, so
/// batches of one stream differ in length and content.
pub fn batch(tag: u64, seq: u64) -> Vec<u8> {
    let n = messages_in(seq);
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let len = ((seq * 37 + i * 101) % 700) as usize;
            (0..len)
                .map(|j| (tag as usize * 13 + seq as usize * 7 + j) as u8)
                .collect()
        })
        .collect();
    let mut b = BatchBuilder::new();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: message_id(tag, seq, i as u64),
            timestamp: 1_700_000_000_000_000 + seq * 1_000 + i as u64,
            payload: p,
            user_headers: if i % 2 == 0 { b"k=v" } else { b"" },
        });
    }
    b.build().unwrap()
}

/// The id `batch(tag, seq)` gives its message `index`.
pub fn message_id(tag: u64, seq: u64, index: u64) -> u128 {
    (u128::from(tag) << 96) | (u128::from(seq) << 32) | u128::from(index)
}

/// `(tag, seq, index)` back from a message id.
pub fn decode_id(id: u128) -> (u64, u64, u64) {
    (
        (id >> 96) as u64,
        ((id >> 32) & 0xFFFF_FFFF_FFFF_FFFF) as u64,
        (id & 0xFFFF_FFFF) as u64,
    )
}

/// The offset batch `seq` of a stream gets when the stream is appended
/// alone and in order to an empty partition.
pub fn base_offset_of(seq: u64) -> u64 {
    (0..seq).map(messages_in).sum()
}

/// An engine on `dir` with `shards` shards and `log`, not pinned (tests
/// share two cores with each other).
pub fn open(dir: &Path, shards: usize, log: LogConfig) -> Engine {
    Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(shards),
        pin_threads: false,
        log,
        ..Config::new(dir)
    })
    .unwrap()
}

/// Small segments, so tests cross segment boundaries and race rotation.
pub fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// Fails the test (by exiting the test process) when it is not disarmed
/// within its limit: the storage layer's, shared by every crate's tests.
#[allow(unused_imports)] // not every test binary arms one
pub use corelog::testing::segment::watchdog::Watchdog;

/// Serializes the tests of one test binary that hold a directory lock in
/// this process and spawn processes: a child forked while the lock file is
/// open holds the lock (flock belongs to the open file, which the child
/// shares) until it execs, so a concurrent test could see a lock its
/// engine had already released.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs the `corelog` binary with `args`, feeding it `stdin` from a thread
/// (it may be large); a command that does not read stdin may exit first,
/// so a broken pipe is fine.
pub fn corelog(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelog"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let feeder = std::thread::spawn(move || drop(input.write_all(&bytes)));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// Appends `bytes` to the replicated partition `p` as its Raft group
/// does: stamped with the partition's next offset and a timestamp after
/// its last (a replicated partition refuses producer batches).
pub fn append_as_replica(engine: &corelog::Handle, p: u64, bytes: Vec<u8>) -> corelog::AppendAck {
    let (next, last) = match engine.stats(p).wait() {
        Ok(s) => (s.end_offset, s.last_timestamp),
        Err(corelog::RequestError::UnknownPartition { .. }) => (0, 0),
        Err(e) => panic!("stats: {e}"),
    };
    engine
        .append_stamped(p, stamped(p, bytes, next, last + 1))
        .wait()
        .unwrap()
}

/// `bytes` stamped as a leader stamps them for partition `p`.
pub fn stamped(p: u64, bytes: Vec<u8>, base_offset: u64, base_timestamp: u64) -> bytes::Bytes {
    corelog::Batch::admit(bytes, &corelog::Limits::default())
        .unwrap()
        .into_stamped(corelog::Stamp {
            partition_id: p,
            base_offset,
            base_timestamp,
        })
}

/// A shard's thread held by a task of its own ([`hold_shard`]): it pops
/// nothing from its queue until released, or until this is dropped (so a
/// failed assertion does not leave the shard held).
pub struct HeldShard(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl HeldShard {
    pub fn release(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for HeldShard {
    fn drop(&mut self) {
        self.release();
    }
}

/// Holds shard `shard`'s thread: see [`HeldShard`].
pub fn hold_shard(engine: &corelog::Handle, shard: usize) -> HeldShard {
    use std::sync::atomic::{AtomicBool, Ordering};
    let release = HeldShard(std::sync::Arc::new(AtomicBool::new(false)));
    let held = release.0.clone();
    let (running, started) = mpsc::channel();
    engine
        .spawn_on(shard, move || async move {
            let _ = running.send(());
            while !held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .wait()
        .unwrap();
    // `spawn_on` answers before the task first runs; the shard may take
    // from its queue until then.
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the holding task never ran");
    release
}
