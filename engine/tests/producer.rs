//! Order and back-pressure (issue 33): a `Producer`'s batches are stored in
//! the order it sent them even when the shard's queue fills (a sender
//! waits for room rather than parking its batch where a later one can pass
//! it), and the one rule for a dropped `Reply`: a sent request is carried
//! out, a parked one is withdrawn.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine};
use std::time::Duration;

const DEPTH: usize = 4;
const SENDS: u64 = 20;

fn engine(dir: &std::path::Path) -> Engine {
    Engine::open(Config {
        shards: Some(1),
        pin_threads: false,
        queue_depth: DEPTH,
        ..Config::new(dir)
    })
    .unwrap()
}

#[test]
fn a_producer_keeps_call_order_through_a_full_queue() {
    let _dog = Watchdog::arm("producer order", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let p = 3;
    engine.handle().create_partition(p).wait().unwrap();
    let release = hold_shard(&engine.handle(), 0);
    let mut producer = engine.handle().producer(p);
    assert_eq!(producer.partition(), p, "the partition it appends to");
    let sender = std::thread::spawn(move || {
        (0..SENDS)
            .map(|seq| producer.send_blocking(batch(1, seq)))
            .collect::<Vec<_>>()
    });
    // The sender fills the queue and waits for room.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!sender.is_finished(), "a full queue holds the sender back");
    release.release();
    let replies = sender.join().unwrap();
    assert!(replies.iter().all(|r| r.is_sent()));
    // Awaited last to first: the order is the queue's, not the awaiting's.
    let mut acks: Vec<_> = replies
        .into_iter()
        .rev()
        .map(|r| r.wait().unwrap())
        .collect();
    acks.reverse();
    for (seq, ack) in acks.iter().enumerate() {
        assert_eq!(ack.base_offset, base_offset_of(seq as u64), "batch {seq}");
    }
    engine.shutdown().unwrap();
}

#[test]
fn a_dropped_reply_is_carried_out_if_sent_and_withdrawn_if_parked() {
    let _dog = Watchdog::arm("dropped replies", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let p = 4;
    engine.handle().create_partition(p).wait().unwrap();
    let release = hold_shard(&engine.handle(), 0);
    let replies: Vec<_> = (0..DEPTH as u64 + 3)
        .map(|seq| engine.handle().append(p, batch(2, seq)))
        .collect();
    let sent = replies.iter().filter(|r| r.is_sent()).count();
    assert_eq!(sent, DEPTH, "the queue's depth is sent, the rest parked");
    assert!(replies[..DEPTH].iter().all(|r| r.is_sent()));
    drop(replies);
    release.release();
    // The next append lands right after the sent ones: the parked ones
    // were never stored.
    let next = engine.handle().append(p, batch(3, 0)).wait().unwrap();
    assert_eq!(
        next.base_offset,
        base_offset_of(DEPTH as u64),
        "the {DEPTH} sent appends stored, the 3 parked ones not"
    );
    engine.shutdown().unwrap();
}

/// `Reply::wait_sent` keeps the order of plain appends issued one after
/// another from a thread through a full queue: each is queued before the
/// next is made, as a replica's persister issues a `Ready`'s batches.
/// (Without the wait, the later appends pass the parked ones and are
/// stored out of order.)
#[test]
fn wait_sent_keeps_call_order_of_plain_appends_through_a_full_queue() {
    let _dog = Watchdog::arm("wait_sent order", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let p = 5;
    engine.handle().create_partition(p).wait().unwrap();
    let release = hold_shard(&engine.handle(), 0);
    let handle = engine.handle();
    let sender = std::thread::spawn(move || {
        (0..SENDS)
            .map(|seq| {
                let mut r = handle.append(p, batch(4, seq));
                r.wait_sent().unwrap();
                assert!(r.is_sent());
                r
            })
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!sender.is_finished(), "a full queue holds the sender back");
    release.release();
    let replies = sender.join().unwrap();
    let mut acks: Vec<_> = replies
        .into_iter()
        .rev()
        .map(|r| r.wait().unwrap())
        .collect();
    acks.reverse();
    for (seq, ack) in acks.iter().enumerate() {
        assert_eq!(ack.base_offset, base_offset_of(seq as u64), "batch {seq}");
    }
    engine.shutdown().unwrap();
}
