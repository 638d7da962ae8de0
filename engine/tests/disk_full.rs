//! A full disk, for real: a small filesystem mounted by the test (a
//! loop-mounted ext4 image, and a tmpfs), nearly filled with a file the
//! test places there, then appended to through the engine under
//! `fsync=batch` until it is full.
//!
//! The append that hits ENOSPC and every later one fail with
//! `RequestError::Storage(e)`, `e.is_no_space()`, a message that says the disk is
//! full; nothing acknowledged is lost (read back while full, and after
//! reopening); once the filler is deleted a reopen recovers and appends go
//! on, and `corelog verify` finds the directory sound.
//!
//! Mounting needs root: without it (or without loop devices, or
//! `mkfs.ext4`) each test says loudly why it is skipped, except under CI
//! (`CI=true`), where a test that cannot run fails: a suite must not pass
//! by skipping. Mounts are undone when a test ends, also when it fails.
//!
//! What is not repeated here: a failed `fdatasync` (or write) poisoning a
//! partition until it is reopened is `segment/tests/log_poison.rs`, on the
//! simulated disk; a second process on the same directory is refused in
//! `engine/tests/lock.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, decode_id, serial, Watchdog};
use corelog::{Config, Engine, FsyncPolicy, LogConfig, OpenError, PollFrom, RequestError};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const P: u64 = 5;
const TAG: u64 = 77;

/// A filesystem mounted on a temporary directory; unmounted when dropped.
struct Mounted {
    point: Option<tempfile::TempDir>,
    _image: Option<tempfile::TempDir>,
    kind: &'static str,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(cmd).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run {cmd}: {e}")),
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

impl Mounted {
    fn tmpfs(size: &str) -> Result<Mounted, String> {
        let point = tempfile::tempdir().map_err(|e| e.to_string())?;
        let p = point.path().to_str().unwrap().to_string();
        run(
            "mount",
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", &p],
        )?;
        Ok(Mounted {
            point: Some(point),
            _image: None,
            kind: "tmpfs",
        })
    }

    fn ext4(bytes: u64) -> Result<Mounted, String> {
        let image_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = image_dir.path().join("fs.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .map_err(|e| e.to_string())?;
        let img = image.to_str().unwrap().to_string();
        run("mkfs.ext4", &["-q", "-F", &img])?;
        let point = tempfile::tempdir().map_err(|e| e.to_string())?;
        let p = point.path().to_str().unwrap().to_string();
        run("mount", &["-o", "loop", &img, &p])?;
        Ok(Mounted {
            point: Some(point),
            _image: Some(image_dir),
            kind: "ext4",
        })
    }

    fn path(&self) -> &Path {
        self.point.as_ref().unwrap().path()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let Some(point) = self.point.take() else {
            return;
        };
        let p = point.path().to_str().unwrap().to_string();
        if let Err(e) = run("umount", &[&p]) {
            eprintln!("{e}; unmounting lazily");
            if let Err(e) = run("umount", &["-l", &p]) {
                eprintln!("{e}: {p} stays mounted");
                std::mem::forget(point);
                return;
            }
        }
        drop(point);
    }
}

/// Mounts with `mount`, or says loudly why the test cannot run (and fails
/// under CI, `CI=true`).
fn mount_or_skip(what: &str, mount: impl FnOnce() -> Result<Mounted, String>) -> Option<Mounted> {
    let reason = if !is_root() {
        "not running as root (mounting a filesystem needs it)".to_string()
    } else {
        match mount() {
            Ok(m) => return Some(m),
            Err(e) => e,
        }
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} cannot run under CI (CI=true), where no test may skip: {reason}"
    );
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {what}: {reason} ***\n");
    None
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        index_interval_bytes: 4 << 10,
        fsync: FsyncPolicy::Batch,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> Result<Engine, OpenError> {
    Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(1),
        pin_threads: false,
        log: config(),
        ..Config::new(dir)
    })
}

/// Fills the filesystem with `path`, then gives `headroom` bytes back.
fn fill(path: &Path, headroom: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0xa5u8; 64 << 10];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
    let len = f.metadata().unwrap().len();
    assert!(
        len > headroom,
        "the filesystem holds more than the headroom"
    );
    f.set_len(len - headroom).unwrap();
    f.sync_all().unwrap();
}

fn assert_no_space(e: &RequestError, what: &str) {
    match e {
        RequestError::Append(_) | RequestError::Storage(_) if e.is_no_space() => {
            let text = e.to_string();
            assert!(
                text.contains("No space left on device") || text.contains("disk is full"),
                "{what}: the message says the disk is full: {text}"
            );
        }
        other => panic!("{what}: expected a full-disk storage error, got {other:?}: {other}"),
    }
}

/// Every batch of the partition, as (base_offset, seq), checked byte for
/// byte against what was sent; offsets continuous, sequence in order.
fn stored(engine: &Engine) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let reply = futures::executor::block_on(engine.handle().poll_verified(
            P,
            PollFrom::Offset(next),
            1 << 20,
        ))
        .unwrap();
        if reply.is_empty() {
            return out;
        }
        for b in reply.batches() {
            assert_eq!(b.base_offset(), next, "offsets continuous");
            let (tag, seq, _) = decode_id(b.messages().next().unwrap().id());
            assert_eq!(tag, TAG);
            assert_eq!(
                seq,
                out.len() as u64,
                "the log is a prefix of what was sent"
            );
            assert_eq!(b.blob(), &batch(TAG, seq)[256..], "byte for byte");
            out.push((next, seq));
            next = b.next_offset();
        }
    }
}

fn assert_acked_present(stored: &[(u64, u64)], acked: &[(u64, u64)], what: &str) {
    assert!(
        stored.len() >= acked.len(),
        "{what}: {} acknowledged batches but {} stored: acknowledged batches LOST",
        acked.len(),
        stored.len()
    );
    assert_eq!(
        &stored[..acked.len()],
        acked,
        "{what}: every acknowledged batch where it was acknowledged"
    );
}

fn disk_full(m: &Mounted) {
    let _watchdog = Watchdog::arm("disk full", Duration::from_secs(600));
    let kind = m.kind;
    let data = m.path().join("data");
    let filler = m.path().join("filler");
    std::fs::create_dir_all(&data).unwrap();
    fill(&filler, 1536 << 10);

    // Append (8 in flight) until the disk is full.
    let engine = open(&data).unwrap();
    let mut acked: Vec<(u64, u64)> = Vec::new();
    let mut pending = std::collections::VecDeque::new();
    let mut failures = 0u64;
    let mut seq = 0u64;
    while failures < 20 {
        assert!(seq < 100_000, "{kind}: the disk never filled");
        pending.push_back((seq, engine.handle().append(P, batch(TAG, seq))));
        seq += 1;
        if pending.len() < 8 {
            continue;
        }
        let (s, reply) = pending.pop_front().unwrap();
        match reply.wait() {
            Ok(ack) => {
                assert_eq!(
                    failures, 0,
                    "{kind}: nothing is acknowledged after a failure"
                );
                assert_eq!(s, acked.len() as u64, "{kind}: acknowledged in order");
                acked.push((ack.base_offset, s));
            }
            Err(e) => {
                assert_no_space(&e, &format!("{kind}: append of batch {s}"));
                failures += 1;
            }
        }
    }
    for (s, reply) in pending {
        let e = reply.wait().unwrap_err();
        assert_no_space(&e, &format!("{kind}: append of batch {s}"));
    }
    assert!(
        acked.len() > 100,
        "{kind}: {} batches fit before the disk was full",
        acked.len()
    );
    let stats = engine.handle().stats(P).wait().unwrap();
    assert!(
        stats.poisoned,
        "{kind}: a failed write poisons the partition: {stats:?}"
    );
    let e = engine
        .handle()
        .append(P, batch(TAG, seq))
        .wait()
        .unwrap_err();
    assert_no_space(&e, &format!("{kind}: append after the failure"));
    // While full: what was acknowledged is readable.
    assert_acked_present(&stored(&engine), &acked, &format!("{kind}, full"));
    // The poisoned partition's final flush fails: shutdown says so.
    match engine.shutdown() {
        Err(corelog::ShutdownError::CloseFailed { partition, error }) => {
            assert_eq!(partition, P, "{kind}");
            assert!(error.is_no_space(), "{kind}: {error}");
        }
        other => panic!("{kind}: shutdown of a poisoned partition: {other:?}"),
    }

    // Reopening while still full: it opens, or says the disk is full.
    match open(&data) {
        Ok(engine) => {
            match engine.recovery()[0].result.as_ref() {
                Ok(_) => assert_acked_present(
                    &stored(&engine),
                    &acked,
                    &format!("{kind}, reopened full"),
                ),
                Err(e) => assert!(e.is_no_space(), "{kind}: reopened full: {e}"),
            }
            engine.shutdown().unwrap();
        }
        // Opening reads and repairs partitions on the shards: a full disk
        // shows in `recovery()` above, never as an `OpenError`.
        Err(e) => panic!("{kind}: reopen while full: expected it to open, got {e:?}: {e}"),
    }

    // Space freed: the partition recovers and appends go on.
    std::fs::remove_file(&filler).unwrap();
    let engine = open(&data).unwrap();
    let report = engine.recovery()[0]
        .result
        .clone()
        .unwrap_or_else(|e| panic!("{kind}: reopen after freeing space: {e}"));
    let found = stored(&engine);
    assert_acked_present(&found, &acked, &format!("{kind}, space freed"));
    let mut next = engine.handle().stats(P).wait().unwrap().next_offset;
    eprintln!(
        "{kind}: {} batches acknowledged before ENOSPC, {} unacknowledged kept; reopened: {report}",
        acked.len(),
        found.len() - acked.len()
    );
    for k in 0..50 {
        let s = found.len() as u64 + k;
        let ack = engine.handle().append(P, batch(TAG, s)).wait().unwrap();
        assert_eq!(
            ack.base_offset, next,
            "{kind}: appends go on after the reopen"
        );
        next += u64::from(ack.message_count);
    }
    assert_eq!(stored(&engine).len(), found.len() + 50);
    engine.shutdown().unwrap();
    let out = common::corelog(&["verify", "--dir", data.to_str().unwrap()], b"");
    assert!(
        out.status.success(),
        "{kind}: verify after recovery: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_full_ext4_disk_fails_appends_clearly_and_loses_nothing_acknowledged() {
    let _serial = serial();
    if let Some(m) = mount_or_skip("ENOSPC on ext4", || Mounted::ext4(16 << 20)) {
        disk_full(&m);
    }
}

#[test]
fn a_full_tmpfs_fails_appends_clearly_and_loses_nothing_acknowledged() {
    let _serial = serial();
    if let Some(m) = mount_or_skip("ENOSPC on tmpfs", || Mounted::tmpfs("8m")) {
        disk_full(&m);
    }
}

/// A partition a full disk poisoned is reopened in place once space is
/// freed (`Handle::reopen_partition`), the engine running: before, it
/// refused every append until the whole engine was reopened. The reopen
/// answers the recovery's report, nothing acknowledged is lost, appends go
/// on at the next offset.
#[test]
fn a_partition_poisoned_by_a_full_tmpfs_reopens_in_place_once_space_is_freed() {
    let _serial = serial();
    let Some(m) = mount_or_skip("reopen after ENOSPC on tmpfs", || Mounted::tmpfs("8m")) else {
        return;
    };
    let _watchdog = Watchdog::arm("reopen in place", Duration::from_secs(300));
    let data = m.path().join("data");
    let filler = m.path().join("filler");
    std::fs::create_dir_all(&data).unwrap();
    fill(&filler, 1536 << 10);
    let engine = open(&data).unwrap();
    let mut acked = Vec::new();
    let mut seq = 0u64;
    loop {
        assert!(seq < 100_000, "the disk never filled");
        match engine.handle().append(P, batch(TAG, seq)).wait() {
            Ok(ack) => acked.push((ack.base_offset, seq)),
            Err(e) => {
                assert_no_space(&e, &format!("append of batch {seq}"));
                break;
            }
        }
        seq += 1;
    }
    assert!(engine.handle().stats(P).wait().unwrap().poisoned);
    std::fs::remove_file(&filler).unwrap();
    // Space is free, but the poisoned partition still refuses.
    let e = engine
        .handle()
        .append(P, batch(TAG, seq))
        .wait()
        .unwrap_err();
    assert!(e.to_string().contains("is poisoned"), "{e}");

    let report = engine.handle().reopen_partition(P).wait().unwrap();
    eprintln!("reopened: {report}");
    let stats = engine.handle().stats(P).wait().unwrap();
    assert!(!stats.poisoned, "the reopen cleared the poison: {stats:?}");
    let found = stored(&engine);
    assert_acked_present(&found, &acked, "reopened in place");
    let mut next = stats.next_offset;
    for k in 0..20 {
        let ack = engine
            .handle()
            .append(P, batch(TAG, found.len() as u64 + k))
            .wait()
            .unwrap();
        assert_eq!(ack.base_offset, next, "appends go on after the reopen");
        next += u64::from(ack.message_count);
    }
    assert_eq!(stored(&engine).len(), found.len() + 20);
    assert!(
        matches!(
            engine.handle().reopen_partition(P + 1).wait(),
            Err(RequestError::UnknownPartition { .. })
        ),
        "no such partition"
    );
    engine.shutdown().unwrap();
}

/// Preallocation never takes more than a sixteenth of the space free when
/// the engine opened, whatever budget is configured: 32 partitions given
/// one small batch each on a 64 MiB tmpfs hold about their data, not a
/// 1 MiB step each (32 MiB, half the disk).
#[test]
fn preallocation_stays_a_small_share_of_free_space() {
    let _serial = serial();
    let Some(m) = mount_or_skip("preallocation on tmpfs", || Mounted::tmpfs("64m")) else {
        return;
    };
    let data = m.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let free = fs4::available_space(&data).unwrap();
    let mut log = LogConfig::default();
    log.preallocation.budget = 1 << 30;
    let engine = Engine::open(Config {
        shards: Some(2),
        pin_threads: false,
        log,
        ..Config::new(&data)
    })
    .unwrap();
    let data_bytes: u64 = (0..32).map(|p| batch(TAG, p).len() as u64).sum();
    let replies: Vec<_> = (0..32)
        .map(|p| engine.handle().append(p, batch(TAG, p)))
        .collect();
    for r in replies {
        r.wait().unwrap();
    }
    let used = free - fs4::available_space(&data).unwrap();
    // Each partition's files and directories take a few pages of their own.
    let files = 32 * (64 << 10);
    assert!(
        used <= data_bytes + free / 16 + files,
        "{used} bytes used for {data_bytes} bytes of data with {free} free"
    );
    engine.shutdown().unwrap();
}
