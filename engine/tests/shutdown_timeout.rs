//! `Engine::shutdown_timeout`: a shard that does not stop in time (a task
//! of its own still running) is named in `ShutdownError::TimedOut` once the time is
//! up; the directory stays locked until it stops, then is released; a
//! shutdown whose shards stop in time is an ordinary shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, OpenError, ShutdownError};
use std::time::{Duration, Instant};

fn config(dir: &std::path::Path) -> Config {
    Config {
        shards: Some(2),
        pin_threads: false,
        ..Config::new(dir)
    }
}

#[test]
fn a_stuck_shard_is_named_and_the_directory_stays_locked_until_it_stops() {
    let _dog = Watchdog::arm("shutdown_timeout", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(config(dir.path())).unwrap();
    engine.handle().append(1, batch(1, 0)).wait().unwrap();
    let held = hold_shard(&engine.handle(), 1);
    let started = Instant::now();
    let err = engine
        .shutdown_timeout(Duration::from_millis(300))
        .unwrap_err();
    let took = started.elapsed();
    let ShutdownError::TimedOut { running, waited } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(running, &vec![1], "shard 0 stopped, shard 1 is held");
    assert!(*waited >= Duration::from_millis(300), "{waited:?}");
    assert!(
        took < Duration::from_secs(10),
        "answered when the time was up: {took:?}"
    );
    // Shard 1 may still write: nobody else may open the directory.
    match Engine::open(config(dir.path())) {
        Err(OpenError::LockHeld { .. }) => {}
        other => panic!("opened under a running shard: {other:?}"),
    }
    held.release();
    // Once it stops, the lock is released and the data is all there.
    let reopened = loop {
        match Engine::open(config(dir.path())) {
            Ok(e) => break e,
            Err(OpenError::LockHeld { .. }) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{e}"),
        }
    };
    let stats = reopened.handle().stats(1).wait().unwrap();
    assert_eq!(stats.next_offset, base_offset_of(1));
    reopened
        .shutdown_timeout(Duration::from_secs(30))
        .expect("shards that stop in time: an ordinary shutdown");
}

/// A stuck shard whose queue is full cannot take the shutdown request when
/// the time is up: it is handed to it later, once it has room, so the
/// shard stops and the directory is released after all.
#[test]
fn a_stuck_shard_with_a_full_queue_still_stops_and_releases_the_directory() {
    let _dog = Watchdog::arm("shutdown_timeout, full queue", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let depth = 4;
    let engine = Engine::open(Config {
        queue_depth: depth,
        ..config(dir.path())
    })
    .unwrap();
    let h = engine.handle();
    let p = 1; // on shard 1
    assert_eq!(h.shard_of(p), 1);
    let held = hold_shard(&h, 1);
    let queued: Vec<_> = (0..depth as u64)
        .map(|seq| h.append(p, batch(p, seq)))
        .collect();
    assert!(queued.iter().all(|r| r.is_sent()), "the queue is full now");
    let err = engine
        .shutdown_timeout(Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, ShutdownError::TimedOut { .. }), "{err:?}");
    held.release();
    // The queued appends are carried out, then the shard stops.
    for r in queued {
        r.wait().unwrap();
    }
    let started = Instant::now();
    let reopened = loop {
        match Engine::open(config(dir.path())) {
            Ok(e) => break e,
            Err(OpenError::LockHeld { .. }) if started.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("the directory was not released: {e}"),
        }
    };
    let stats = reopened.handle().stats(p).wait().unwrap();
    assert_eq!(stats.next_offset, base_offset_of(depth as u64));
    reopened.shutdown().unwrap();
}

/// A shard busy when the shutdown starts but done well within the
/// timeout: an ordinary shutdown, answered once it stops, not when the
/// time is up.
#[test]
fn a_shard_that_stops_in_time_ends_an_ordinary_shutdown_as_soon_as_it_stops() {
    let _dog = Watchdog::arm("shutdown_timeout, in time", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(config(dir.path())).unwrap();
    engine.handle().append(1, batch(1, 0)).wait().unwrap();
    let held = hold_shard(&engine.handle(), 1);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        held.release();
    });
    let started = Instant::now();
    engine
        .shutdown_timeout(Duration::from_secs(30))
        .expect("a shard that stops in time: an ordinary shutdown");
    let took = started.elapsed();
    releaser.join().unwrap();
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(10),
        "answered once the held shard stopped (200 ms), not at the timeout (30 s): {took:?}"
    );
}
