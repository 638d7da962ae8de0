//! Placement and pinning an embedder chooses (issue 33): a placement
//! function decides which shard owns a partition, for requests and for the
//! partitions found at open, and may change between runs; the shards are
//! pinned to the CPUs `Config::cpus` names, and a CPU the process may not
//! use is refused at open.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, OpenError, OpenPartitions, Placement};
use std::time::Duration;

fn config(dir: &std::path::Path) -> Config {
    Config::new(dir)
        .shards(2)
        .pin_threads(false)
        .open_partitions(OpenPartitions::AtOpen)
}

#[test]
fn a_placement_function_decides_the_owning_shard_and_may_change_between_runs() {
    let dir = tempfile::tempdir().unwrap();
    let all_on_one = || Placement::new(|_, _| 1);
    let engine = Engine::open(config(dir.path()).placement(all_on_one())).unwrap();
    for p in 0..6 {
        assert_eq!(engine.handle().shard_of(p), 1);
        engine.handle().append(p, batch(p, 0)).wait().unwrap();
    }
    let m = engine.handle().metrics();
    assert_eq!((m.shards[0].appends, m.shards[1].appends), (0, 6));
    engine.shutdown().unwrap();

    // The same placement again: shard 1 finds all six.
    let engine = Engine::open(config(dir.path()).placement(all_on_one())).unwrap();
    let shards: Vec<_> = engine.recovery().iter().map(|r| r.shard).collect();
    assert_eq!(shards, vec![1; 6]);
    engine.shutdown().unwrap();

    // Another placement: each partition is found by its new shard, whole.
    let engine = Engine::open(config(dir.path())).unwrap();
    let mut found: Vec<_> = engine
        .recovery()
        .iter()
        .map(|r| (r.partition, r.shard))
        .collect();
    found.sort();
    assert_eq!(
        found,
        (0..6).map(|p| (p, p as usize % 2)).collect::<Vec<_>>()
    );
    for p in 0..6 {
        let ack = engine.handle().append(p, batch(p, 1)).wait().unwrap();
        assert_eq!(
            ack.base_offset,
            base_offset_of(1),
            "partition {p} kept its batch"
        );
    }
    engine.shutdown().unwrap();
}

#[test]
fn shards_are_pinned_to_the_cpus_named_and_a_cpu_not_allowed_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Config::new(dir.path()).shards(2).cpus(vec![0])).unwrap();
    for shard in 0..2 {
        let (tx, rx) = std::sync::mpsc::channel();
        engine
            .handle()
            .spawn_on(shard, move || async move {
                let cpus: Vec<usize> = core_affinity::get_core_ids()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| c.id)
                    .collect();
                tx.send(cpus).unwrap();
            })
            .wait()
            .unwrap();
        let cpus = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(cpus, vec![0], "shard {shard} runs on CPU 0 only");
    }
    engine.shutdown().unwrap();

    let err = Engine::open(Config::new(dir.path()).cpus(vec![0, 100_000])).unwrap_err();
    assert!(
        matches!(err, OpenError::CpuNotAllowed { cpu: 100_000, .. }),
        "{err}"
    );
    let err = Engine::open(Config::new(dir.path()).cpus(vec![])).unwrap_err();
    assert!(matches!(err, OpenError::InvalidConfig { .. }), "{err}");
}

/// A request made on a shard's own thread skips the queue only when that
/// shard owns it: one for a partition of the other shard, or of another
/// engine's shard of the same index, still goes to its owner (else a shard
/// would open a partition another shard owns, or write into another
/// engine's directory).
#[test]
fn a_request_made_on_a_shard_thread_reaches_the_shard_and_engine_that_own_it() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Engine::open(config(a_dir.path())).unwrap();
    let b = Engine::open(config(b_dir.path())).unwrap();
    let (ha, hb) = (a.handle(), b.handle());
    assert_eq!((ha.shard_of(0), ha.shard_of(1), hb.shard_of(2)), (0, 1, 0));
    let (tx, rx) = std::sync::mpsc::channel();
    let (ha2, hb2) = (ha.clone(), hb.clone());
    ha.spawn_on(0, move || async move {
        let own = ha2.append(0, batch(0, 0)).await.map(|a| a.base_offset);
        let other_shard = ha2.append(1, batch(1, 0)).await.map(|a| a.base_offset);
        let other_engine = hb2.append(2, batch(2, 0)).await.map(|a| a.base_offset);
        tx.send((own, other_shard, other_engine)).unwrap();
    })
    .wait()
    .unwrap();
    let (own, other_shard, other_engine) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        (own.unwrap(), other_shard.unwrap(), other_engine.unwrap()),
        (0, 0, 0)
    );
    let (ma, mb) = (ha.metrics(), hb.metrics());
    assert_eq!((ma.shards[0].appends, ma.shards[1].appends), (1, 1));
    assert_eq!((mb.shards[0].appends, mb.shards[1].appends), (1, 0));
    let mut in_a = futures::executor::block_on(ha.partitions()).unwrap();
    in_a.sort();
    assert_eq!(in_a, vec![0, 1]);
    assert_eq!(
        futures::executor::block_on(hb.partitions()).unwrap(),
        vec![2]
    );
    // The other shard's partition, appended to from outside: one log, in order.
    assert_eq!(
        ha.append(1, batch(1, 1)).wait().unwrap().base_offset,
        messages_in(0)
    );
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}
