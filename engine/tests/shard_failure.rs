//! A shard that panics in its own work fails loudly: a request it held,
//! one queued behind the panic and every later one for its partitions get
//! `ShardFailed` at once (before, they waited forever), the other shards go
//! on, shutdown returns, and a reopen finds what was acknowledged.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{PollFrom, RequestError};
use std::time::Duration;

#[test]
fn a_panicking_shard_answers_its_callers_shard_failed_and_the_others_go_on() {
    let _dog = Watchdog::arm("callers of a panicked shard", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    // Partition 0 on shard 0, partition 1 on shard 1.
    let engine = open(dir.path(), 2, small_segments());
    for p in [0u64, 1] {
        engine.handle().append(p, batch(p, 0)).wait().unwrap();
    }
    // Held by shard 0 when it dies: a poll waiting for data.
    let held = engine.handle().poll_wait(
        0,
        PollFrom::Offset(base_offset_of(1)),
        1 << 20,
        Duration::from_secs(600),
    );
    std::thread::sleep(Duration::from_millis(20));
    let health = engine.handle().health();
    assert!(health.is_healthy(), "{health:?}");
    assert_eq!(health.failed().count(), 0, "{health:?}");
    engine.handle().inject_shard_panic(0);
    // Queued behind the panic.
    let queued = engine.handle().append(0, batch(0, 1));
    let is_failed = |r: Result<_, RequestError>| match r {
        Err(RequestError::ShardFailed { shard: 0 }) => {}
        Err(e) => panic!("expected ShardFailed {{ shard: 0 }}, got: {e}"),
        Ok(_) => panic!("expected ShardFailed {{ shard: 0 }}, got an answer"),
    };
    is_failed(held.wait().map(|_| ()));
    is_failed(queued.wait().map(|_| ()));
    // Later requests: at once.
    is_failed(engine.handle().append(0, batch(0, 2)).wait().map(|_| ()));
    is_failed(engine.handle().stats(0).wait().map(|_| ()));
    // The other shard is untouched.
    let ack = engine.handle().append(1, batch(1, 1)).wait().unwrap();
    assert_eq!(ack.base_offset, base_offset_of(1));
    // And the engine says which one failed.
    let health = engine.handle().health();
    assert!(!health.is_healthy());
    assert_eq!(health.failed().collect::<Vec<_>>(), vec![0]);
    assert_eq!(health.shards[1].state, corelog::ShardState::Running);
    engine.shutdown().unwrap();

    // What shard 0 acknowledged is there after a reopen.
    let engine = open(dir.path(), 2, small_segments());
    let reply = engine
        .handle()
        .poll(0, PollFrom::First, 1 << 20)
        .wait()
        .unwrap();
    assert_eq!(reply.batch_count(), 1);
    assert_eq!(
        engine
            .handle()
            .poll(1, PollFrom::First, 1 << 20)
            .wait()
            .unwrap()
            .batch_count(),
        2
    );
    engine.shutdown().unwrap();
}
