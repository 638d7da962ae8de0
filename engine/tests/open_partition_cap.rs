//! The cap of open partitions: past it, idle partitions are closed and give
//! back their descriptor and mappings; a poll reply taken before stays
//! valid; the next request reopens the partition with everything in it.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, LogConfig, PollFrom};

const CAP: usize = 4;
const PARTITIONS: u64 = 40;

/// Mappings of segment files under `dir` in this process.
fn mapped_segments(dir: &std::path::Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let needle = dir.to_str().unwrap();
    maps.lines()
        .filter(|l| l.contains(needle) && l.ends_with(".log"))
        .count()
}

fn descriptors_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

/// An engine of `shards` shards with at most `CAP` partitions open.
fn open_capped(dir: &std::path::Path, shards: usize) -> Engine {
    Engine::open(Config {
        shards: Some(shards),
        max_open_partitions: CAP,
        log: LogConfig::default(),
        ..Config::new(dir)
    })
    .unwrap()
}

#[test]
fn idle_partitions_give_back_descriptors_and_mappings_and_reopen_whole() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let engine = open_capped(&dir, 1);
    let sent: Vec<Vec<u8>> = (0..PARTITIONS).map(|p| batch(p, p % 5)).collect();
    engine.handle().append(0, sent[0].clone()).wait().unwrap();
    // A reply held while its partition is closed under it.
    let held = engine
        .handle()
        .poll_verified(0, PollFrom::First, 1 << 20)
        .wait()
        .unwrap();
    for p in 1..PARTITIONS {
        engine
            .handle()
            .append(p, sent[p as usize].clone())
            .wait()
            .unwrap();
        // Let the closes of idle partitions run.
        futures::executor::block_on(engine.handle().flush_all()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let fds = descriptors_under(&dir);
    let maps = mapped_segments(&dir);
    assert!(
        fds <= CAP + 2,
        "{fds} descriptors under the data directory with a cap of {CAP} open partitions"
    );
    assert!(
        maps <= CAP + 1,
        "{maps} segment mappings with a cap of {CAP} (+1 held by the reply)"
    );
    // The held reply's bytes are intact although its partition was closed.
    let b: Vec<_> = held.batches().collect();
    assert_eq!(b.len(), 1);
    assert_eq!(&b[0].as_bytes()[256..], &sent[0][256..]);
    held.verify(&corelog::Limits::default()).unwrap();
    drop(held);
    // Every partition reopens on its next request, whole.
    for (p, produced) in sent.iter().enumerate() {
        let reply = engine
            .handle()
            .poll_verified(p as u64, PollFrom::First, 1 << 20)
            .wait()
            .unwrap();
        let batches: Vec<_> = reply.batches().collect();
        assert_eq!(batches.len(), 1, "partition {p}");
        assert_eq!(
            &batches[0].as_bytes()[256..],
            &produced[256..],
            "partition {p}"
        );
    }
    let ack = engine.handle().append(0, batch(0, 9)).wait().unwrap();
    assert_eq!(
        ack.base_offset,
        messages_in(0),
        "offsets continue after a reopen"
    );
    engine.shutdown().unwrap();
}

/// The cap is the engine's, shared among its shards (each holds its part):
/// two shards with a cap of four keep four partitions open, not eight,
/// and not fewer.
#[test]
fn the_cap_is_shared_among_the_shards() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let engine = open_capped(&dir, 2);
    for p in 0..PARTITIONS {
        engine.handle().append(p, batch(p, 0)).wait().unwrap();
        futures::executor::block_on(engine.handle().flush_all()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (fds, maps) = (descriptors_under(&dir), mapped_segments(&dir));
    assert!(
        fds <= CAP + 2 && maps <= CAP,
        "{fds} descriptors and {maps} segment mappings under the data directory \
         with a cap of {CAP} open partitions over two shards"
    );
    // And no fewer: idle partitions stay open up to the cap, each shard's
    // part of it, so the next request to them needs no reopening.
    assert_eq!(
        maps, CAP,
        "segment mappings: each shard keeps its part open"
    );
    engine.shutdown().unwrap();
}

/// With appends in flight to more partitions than the cap at once, the
/// shard keeps closing and reopening them; a request that reaches a
/// partition while it is being closed waits and is served by its
/// reopening: none fails, and every partition holds its batches in order.
#[test]
fn appends_to_more_partitions_than_the_cap_at_once_all_land_in_order() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let engine = open_capped(&tmp.path().join("data"), 1);
    const ROUNDS: u64 = 30;
    for seq in 0..ROUNDS {
        // Every partition's append in flight together: more than the cap.
        let pending: Vec<_> = (0..3 * CAP as u64)
            .map(|p| (p, engine.handle().append(p, batch(p, seq))))
            .collect();
        for (p, r) in pending {
            let ack = r
                .wait()
                .unwrap_or_else(|e| panic!("partition {p}, batch {seq}: {e}"));
            assert_eq!(ack.base_offset, base_offset_of(seq), "partition {p}");
        }
    }
    engine.shutdown().unwrap();
}
