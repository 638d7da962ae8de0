//! A broker's shape: ten thousand partitions in one engine, each appended
//! to, reopened (lazily, on its first request) and polled back; what they
//! hold on disk is their data, not a preallocated segment each.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, LogConfig, PollFrom};
use std::path::Path;
use std::time::Instant;

const PARTITIONS: u64 = 10_000;

fn open_engine(dir: &Path) -> Engine {
    Engine::open(Config {
        shards: Some(2),
        log: LogConfig::default(),
        ..Config::new(dir)
    })
    .unwrap()
}

/// The resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Bytes of every file under `dir`, as allocated on disk.
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

#[test]
fn ten_thousand_partitions_append_reopen_and_poll_back() {
    let _serial = serial();
    let _dog = Watchdog::arm(
        "ten thousand partitions",
        std::time::Duration::from_secs(600),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sent: Vec<Vec<u8>> = (0..PARTITIONS).map(|p| batch(p, p % 7)).collect();
    let fds_before = open_descriptors();
    {
        let engine = open_engine(dir);
        let replies: Vec<_> = sent
            .iter()
            .enumerate()
            .map(|(p, b)| engine.handle().append(p as u64, b.clone()))
            .collect();
        for (p, r) in replies.into_iter().enumerate() {
            let ack = r.wait().unwrap();
            assert_eq!(ack.base_offset, 0, "partition {p}");
        }
        let fds = open_descriptors() - fds_before;
        assert!(
            fds <= PARTITIONS as usize + 64,
            "one descriptor per open partition, not more: {fds}"
        );
        engine.shutdown().unwrap();
    }
    let data: u64 = sent.iter().map(|b| b.len() as u64).sum();
    let used = disk_usage(dir);
    // Each partition: its data, a small index and a directory's worth of
    // metadata blocks; no preallocated segment (1 GiB each by default).
    assert!(
        used < data + PARTITIONS * 64 * 1024,
        "{used} bytes on disk for {data} bytes of data"
    );

    let rss_before = rss();
    let started = Instant::now();
    let engine = open_engine(dir);
    let opened = started.elapsed();
    assert!(
        engine.recovery().is_empty(),
        "partitions open on first request"
    );
    let mut listed = futures::executor::block_on(engine.handle().partitions()).unwrap();
    listed.sort_unstable();
    assert_eq!(listed, (0..PARTITIONS).collect::<Vec<_>>());
    for (p, produced) in sent.iter().enumerate() {
        let reply = engine
            .handle()
            .poll_verified(p as u64, PollFrom::First, 1 << 20)
            .wait()
            .unwrap();
        let batches: Vec<_> = reply.batches().collect();
        assert_eq!(batches.len(), 1, "partition {p}");
        let b = batches[0];
        assert_eq!((b.partition_id(), b.base_offset()), (p as u64, 0));
        assert_eq!(
            &b.as_bytes()[256..],
            &produced[256..],
            "partition {p}: frames"
        );
    }
    // Every partition is open now and idle: what each costs in memory.
    let per_partition = rss().saturating_sub(rss_before) / PARTITIONS;
    eprintln!("resident memory per open, idle partition: {per_partition} bytes");
    // Appends go on after the reopen.
    let ack = engine
        .handle()
        .append(PARTITIONS - 1, batch(1, 1))
        .wait()
        .unwrap();
    assert_eq!(ack.base_offset, (PARTITIONS - 1) % 7 % 4 + 1);
    engine.shutdown().unwrap();
    eprintln!("opened an engine over {PARTITIONS} partitions in {opened:?}");
}
