//! Readers polling while writers append: a reader only ever sees whole,
//! valid batches, continuous from offset 0, each exactly as its producer
//! built it (but for the stamped header fields), never one that was not yet
//! handed to `append`, and in the end sees every batch.
//!
//! Segments are small, so polls race rotation and span segment files.
#![allow(clippy::unwrap_used)]

mod common;

use common::{base_offset_of, batch, decode_id, messages_in, open, small_segments, Watchdog};
use corelog::{FsyncPolicy, Handle, LogConfig, PollFrom, PollReply};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const PARTITIONS: u64 = 4;
/// Appends a writer keeps in flight.
const WINDOW: usize = 8;

/// Per partition: how many batches were handed to `append` so far.
struct Progress {
    issued: Vec<AtomicU64>,
    writers_done: AtomicBool,
}

fn write_stream(h: &Handle, p: u64, batches: u64, progress: &Progress) {
    let mut pending = std::collections::VecDeque::new();
    let settle = |(seq, reply): (u64, corelog::Reply<corelog::AppendAck>)| {
        let ack = reply.wait().unwrap();
        assert_eq!(
            ack.base_offset,
            base_offset_of(seq),
            "partition {p}: appends from one thread keep their order"
        );
        assert_eq!(u64::from(ack.message_count), messages_in(seq));
    };
    for seq in 0..batches {
        let bytes = batch(p, seq);
        // Counted before the call: a reader that sees the batch must find it
        // counted.
        progress.issued[p as usize].fetch_add(1, Ordering::SeqCst);
        pending.push_back((seq, h.append(p, bytes)));
        if pending.len() >= WINDOW {
            settle(pending.pop_front().unwrap());
        }
    }
    pending.into_iter().for_each(settle);
}

/// Checks every batch of `reply` against what its producer built, and that
/// it continues at `*next`; advances `*next` and `*seen`.
fn check_reply(p: u64, reply: &PollReply, max_bytes: u64, next: &mut u64, seen: &mut u64) {
    if reply.batch_count() > 1 {
        assert!(
            reply.len() <= max_bytes,
            "partition {p}: {reply:?} exceeds max_bytes {max_bytes}"
        );
    }
    let mut bytes = 0;
    for b in reply.batches() {
        assert_eq!(
            b.base_offset(),
            *next,
            "partition {p}: batches continue without gap or overlap"
        );
        assert_eq!(b.partition_id(), p);
        let first = b.messages().next().unwrap();
        let (tag, seq, index) = decode_id(first.id());
        assert_eq!((tag, index), (p, 0));
        assert_eq!(
            seq, *seen,
            "partition {p}: batch {seq} where batch {seen} was due"
        );
        let produced = batch(p, seq);
        assert_eq!(
            b.as_bytes().len(),
            produced.len(),
            "partition {p} batch {seq}: whole"
        );
        assert_eq!(
            b.blob(),
            &produced[256..],
            "partition {p} batch {seq}: frames as produced"
        );
        assert_eq!(
            b.origin_timestamp(),
            u64::from_le_bytes(produced[24..32].try_into().unwrap())
        );
        bytes += b.batch_length();
        *next = b.next_offset();
        *seen += 1;
    }
    assert_eq!(bytes, reply.len());
    assert_eq!(reply.next_offset(), *next);
}

fn read_stream(h: &Handle, p: u64, batches: u64, progress: &Progress, reader: u64) {
    let limits = h.limits();
    let (mut next, mut seen, mut round) = (0u64, 0u64, 0u64);
    loop {
        round += 1;
        let done_before = progress.writers_done.load(Ordering::SeqCst);
        let max_bytes = [1, 3000, 1 << 20][((round + reader) % 3) as usize];
        let reply = if (round + reader).is_multiple_of(2) {
            let r = h.poll(p, PollFrom::Offset(next), max_bytes).wait().unwrap();
            r.verify(&limits).unwrap();
            r
        } else {
            futures::executor::block_on(h.poll_verified(p, PollFrom::Offset(next), max_bytes))
                .unwrap()
        };
        let issued = progress.issued[p as usize].load(Ordering::SeqCst);
        if reply.is_empty() {
            assert_eq!(
                reply.next_offset(),
                next,
                "partition {p}: an empty reply at the visible end"
            );
            if done_before {
                break;
            }
            std::thread::yield_now();
            continue;
        }
        check_reply(p, &reply, max_bytes, &mut next, &mut seen);
        assert!(
            seen <= issued,
            "partition {p}: reader saw {seen} batches, only {issued} were appended"
        );
        if round.is_multiple_of(7) {
            // The last batch, as a tail-follower would ask for it.
            let last = h.poll(p, PollFrom::Last, 1 << 20).wait().unwrap();
            last.verify(&limits).unwrap();
            assert_eq!(last.batch_count(), 1);
            let b = last.batches().next().unwrap();
            let (_, seq, _) = decode_id(b.messages().next().unwrap().id());
            assert_eq!(b.base_offset(), base_offset_of(seq));
            assert_eq!(b.blob(), &batch(p, seq)[256..]);
            assert!(seq < progress.issued[p as usize].load(Ordering::SeqCst));
        }
    }
    assert_eq!(
        seen, batches,
        "partition {p}: reader {reader} saw every batch"
    );
    assert_eq!(next, base_offset_of(batches));
}

fn race(fsync: FsyncPolicy, batches: u64) {
    let _watchdog = Watchdog::arm("polls racing appends", Duration::from_secs(300));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(
        dir.path(),
        2,
        LogConfig {
            fsync,
            ..small_segments()
        },
    );
    for p in 0..PARTITIONS {
        engine.handle().create_partition(p).wait().unwrap();
    }
    let progress = Progress {
        issued: (0..PARTITIONS).map(|_| AtomicU64::new(0)).collect(),
        writers_done: AtomicBool::new(false),
    };
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..PARTITIONS)
            .map(|p| {
                let (h, progress) = (engine.handle(), &progress);
                s.spawn(move || write_stream(&h, p, batches, progress))
            })
            .collect();
        for p in 0..PARTITIONS {
            for reader in 0..2 {
                let (h, progress) = (engine.handle(), &progress);
                s.spawn(move || read_stream(&h, p, batches, progress, reader));
            }
        }
        let results: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        // Set even when a writer failed, so the readers stop.
        progress.writers_done.store(true, Ordering::SeqCst);
        for r in results {
            r.unwrap();
        }
    });
    for p in 0..PARTITIONS {
        let stats = engine.handle().stats(p).wait().unwrap();
        assert_eq!(stats.next_offset, base_offset_of(batches));
        assert!(
            stats.segments > 1,
            "partition {p}: the race crossed segment rotations"
        );
    }
    engine.shutdown().unwrap();
}

#[test]
fn readers_see_whole_continuous_batches_while_writers_append_fsync_never() {
    race(FsyncPolicy::Never, 300);
}

#[test]
fn readers_see_whole_continuous_batches_while_writers_append_fsync_batch() {
    race(FsyncPolicy::Batch, 120);
}

#[test]
fn readers_keep_up_under_fsync_interval() {
    race(FsyncPolicy::Interval(Duration::from_millis(5)), 150);
}
