//! Explicit back-pressure (issue 33): `Handle::try_append` hands the batch
//! back (`Full`) when the shard's queue is full, instead of parking the
//! request inside its `Reply`; what it queued is stored in order once the
//! shard drains its queue.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Batch, Config, Engine, Full, Limits};

const DEPTH: usize = 8;

#[test]
fn a_full_queue_hands_the_batch_back_and_what_was_queued_is_stored_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Config {
        shards: Some(1),
        pin_threads: false,
        queue_depth: DEPTH,
        ..Config::new(dir.path())
    })
    .unwrap();
    let p = 3;
    engine.handle().append(p, batch(1, 0)).wait().unwrap();

    // The shard's thread held by a task of its own: it pops nothing.
    let release = hold_shard(&engine.handle(), 0);

    let admit = |seq| Batch::admit(batch(1, seq), &Limits::default()).unwrap();
    let mut queued = Vec::new();
    for seq in 1..=DEPTH as u64 {
        match engine.handle().try_append(p, admit(seq)) {
            Ok(reply) => queued.push(reply),
            Err(Full(_)) => panic!("batch {seq} refused with {} queued", queued.len()),
        }
    }
    let Err(Full(back)) = engine.handle().try_append(p, admit(DEPTH as u64 + 1)) else {
        panic!("a full queue took another batch");
    };
    assert_eq!(
        back.bytes().as_ref(),
        batch(1, DEPTH as u64 + 1).as_slice(),
        "the very batch is handed back"
    );

    release.release();
    let mut next = messages_in(0);
    for (i, reply) in queued.into_iter().enumerate() {
        let ack = reply.wait().unwrap();
        assert_eq!(ack.base_offset, next, "batch {} stored in order", i + 1);
        next += messages_in(i as u64 + 1);
    }
    // Room again: the handed-back batch goes in after them.
    let ack = engine
        .handle()
        .try_append(p, back)
        .ok()
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(ack.base_offset, next);
    engine.shutdown().unwrap();
}

/// A batch larger than the engine's `max_batch_bytes` is refused by
/// `try_append` itself, naming both sizes, and nothing of it is stored
/// (it was admitted under a caller's looser limits); one of exactly that
/// size is stored. And a `Full` says what it handed back.
#[test]
fn try_append_refuses_a_batch_over_the_engines_limit_and_takes_one_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let at = batch(1, 0);
    let mut log = corelog::LogConfig::default();
    log.limits.max_batch_bytes = at.len() as u64;
    let engine = Engine::open(
        Config::new(dir.path())
            .shards(1)
            .pin_threads(false)
            .log(log),
    )
    .unwrap();
    let h = engine.handle();
    let p = 5;
    h.create_partition(p).wait().unwrap();
    let loose = |bytes: Vec<u8>| Batch::admit(bytes, &Limits::default()).unwrap();
    let over = batch(1, 1);
    assert!(over.len() > at.len());
    let e = h
        .try_append(p, loose(over.clone()))
        .ok()
        .unwrap()
        .wait()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&over.len().to_string()) && text.contains(&at.len().to_string()),
        "{text}"
    );
    assert_eq!(e.kind(), corelog::ErrorKind::BadBatch, "{e}");
    let ack = h
        .try_append(p, loose(at.clone()))
        .ok()
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        ack.base_offset, 0,
        "nothing of the refused batch was stored"
    );
    let reply = h.poll(p, corelog::PollFrom::First, 1 << 20).wait().unwrap();
    assert_eq!(reply.batches().count(), 1);
    let full = Full(loose(at.clone()));
    assert_eq!(
        full.to_string(),
        format!(
            "the shard's queue is full: a batch of {} bytes was handed back",
            at.len()
        )
    );
    engine.shutdown().unwrap();
}
