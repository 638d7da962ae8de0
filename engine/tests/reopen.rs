//! Reopening a data directory (same shard count, another shard count), and
//! the partition API through the engine: creation, listing, stats, consumer
//! offsets, polls of missing partitions, refused batches.
#![allow(clippy::unwrap_used)]

mod common;

use common::{base_offset_of, batch, decode_id, messages_in, open, small_segments};
use corelog::replication::ReplicaLog;
use corelog::AppendError;
use corelog::{Batch, BatchError, Engine, Limits, LogConfig, PollFrom, RequestError};

/// Appends batches `from..to` of stream `p` to partition `p`.
fn append_range(engine: &Engine, p: u64, from: u64, to: u64) {
    let replies: Vec<_> = (from..to)
        .map(|seq| (seq, engine.handle().append(p, batch(p, seq))))
        .collect();
    for (seq, r) in replies {
        let ack = r.wait().unwrap();
        assert_eq!(
            ack.base_offset,
            base_offset_of(seq),
            "partition {p} batch {seq}"
        );
    }
}

/// Checks that partition `p` holds exactly batches `0..n` of stream `p`.
fn check_contents(engine: &Engine, p: u64, n: u64) {
    let mut next = 0;
    let mut seq = 0;
    loop {
        let reply = futures::executor::block_on(engine.handle().poll_verified(
            p,
            PollFrom::Offset(next),
            8 << 10,
        ))
        .unwrap();
        if reply.is_empty() {
            break;
        }
        for b in reply.batches() {
            assert_eq!(b.base_offset(), next);
            assert_eq!(b.partition_id(), p);
            assert_eq!(decode_id(b.messages().next().unwrap().id()), (p, seq, 0));
            assert_eq!(b.blob(), &batch(p, seq)[256..]);
            next = b.next_offset();
            seq += 1;
        }
    }
    assert_eq!(seq, n, "partition {p}: every batch, nothing more");
}

fn partitions(engine: &Engine) -> Vec<u64> {
    futures::executor::block_on(engine.handle().partitions()).unwrap()
}

const WRITTEN: [u64; 5] = [0, 1, 2, 3, 4];
const EMPTY: u64 = 10;

/// Partitions 0..5 with `40 + 10 p` batches each (several segments), and
/// an empty partition made by `create_partition`.
fn populate(engine: &Engine) {
    engine.handle().create_partition(EMPTY).wait().unwrap();
    engine.handle().create_partition(EMPTY).wait().unwrap();
    for p in WRITTEN {
        append_range(engine, p, 0, 40 + 10 * p);
    }
}

fn batches_of(p: u64) -> u64 {
    40 + 10 * p
}

#[test]
fn reopen_with_the_same_placement_finds_every_partition_and_continues_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    populate(&engine);
    assert_eq!(partitions(&engine), vec![0, 1, 2, 3, 4, EMPTY]);
    for p in WRITTEN {
        let stats = engine.handle().stats(p).wait().unwrap();
        let n = batches_of(p);
        assert_eq!(stats.partition, p);
        assert_eq!(stats.first_offset, 0);
        assert_eq!(stats.next_offset, base_offset_of(n));
        assert_eq!(stats.appends, n);
        assert_eq!(
            stats.bytes,
            (0..n).map(|s| batch(p, s).len() as u64).sum::<u64>()
        );
        assert!(stats.segments > 1, "partition {p} rotated: {stats:?}");
        assert!(!stats.poisoned);
    }
    let empty = engine.handle().stats(EMPTY).wait().unwrap();
    assert_eq!((empty.next_offset, empty.bytes, empty.appends), (0, 0, 0));
    engine.handle().store_offset(2, 7, 5).wait().unwrap();
    engine.shutdown().unwrap();

    let engine = open(dir.path(), 2, small_segments());
    let found: Vec<(u64, usize)> = engine
        .recovery()
        .iter()
        .map(|r| (r.partition, r.shard))
        .collect();
    assert_eq!(
        found,
        vec![(0, 0), (1, 1), (2, 0), (3, 1), (4, 0), (EMPTY, 0)]
    );
    for r in engine.recovery() {
        let report = r.result.as_ref().unwrap();
        let expected = if r.partition == EMPTY {
            0
        } else {
            base_offset_of(batches_of(r.partition))
        };
        assert_eq!(report.next_offset, expected, "partition {}", r.partition);
        assert!(
            report.cut.is_none() && report.removed.is_empty(),
            "a clean shutdown leaves nothing to repair: {report}"
        );
    }
    assert_eq!(partitions(&engine), vec![0, 1, 2, 3, 4, EMPTY]);
    assert_eq!(
        engine.handle().load_offset(2, 7).wait().unwrap(),
        Some(5),
        "consumer offsets survive"
    );
    for p in WRITTEN {
        check_contents(&engine, p, batches_of(p));
        // Offsets continue where they stopped.
        append_range(&engine, p, batches_of(p), batches_of(p) + 3);
        check_contents(&engine, p, batches_of(p) + 3);
    }
    let ack = engine
        .handle()
        .append(EMPTY, batch(EMPTY, 0))
        .wait()
        .unwrap();
    assert_eq!(ack.base_offset, 0);
    engine.shutdown().unwrap();
}

#[test]
fn reopen_with_another_shard_count_finds_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    populate(&engine);
    engine.shutdown().unwrap();

    let mut extra = 0;
    for shards in [3, 1, 4] {
        let engine = open(dir.path(), shards, small_segments());
        assert_eq!(engine.handle().shards(), shards);
        let found: Vec<(u64, usize)> = engine
            .recovery()
            .iter()
            .map(|r| (r.partition, r.shard))
            .collect();
        let expected: Vec<(u64, usize)> = [0, 1, 2, 3, 4, EMPTY]
            .into_iter()
            .map(|p| (p, (p % shards as u64) as usize))
            .collect();
        assert_eq!(
            found, expected,
            "{shards} shards: every partition, placed by p % shards"
        );
        assert!(engine.recovery().iter().all(|r| r.result.is_ok()));
        assert_eq!(partitions(&engine), vec![0, 1, 2, 3, 4, EMPTY]);
        for p in WRITTEN {
            assert_eq!(engine.handle().shard_of(p), (p % shards as u64) as usize);
            check_contents(&engine, p, batches_of(p) + extra);
            append_range(&engine, p, batches_of(p) + extra, batches_of(p) + extra + 2);
        }
        extra += 2;
        engine.shutdown().unwrap();
    }
}

#[test]
fn consumer_offsets_and_poll_next_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, small_segments());
    append_range(&engine, 3, 0, 20);
    // No stored offset: from the first batch.
    assert_eq!(engine.handle().load_offset(3, 1).wait().unwrap(), None);
    let first = engine.handle().poll_next(3, 1, 1).wait().unwrap();
    assert_eq!((first.first_offset(), first.batch_count()), (0, 1));
    // After the stored offset: from the batch holding the next one, which
    // may start before it (batches are served whole).
    for stored in [0, 1, 5, 6, base_offset_of(19) - 1] {
        engine.handle().store_offset(3, 1, stored).wait().unwrap();
        assert_eq!(
            engine.handle().load_offset(3, 1).wait().unwrap(),
            Some(stored)
        );
        let reply = engine.handle().poll_next(3, 1, 1).wait().unwrap();
        let b = reply.batches().next().unwrap();
        assert!(
            b.base_offset() <= stored + 1 && stored + 1 < b.next_offset(),
            "stored {stored}: {b:?}"
        );
    }
    // Consumers are independent.
    engine
        .handle()
        .store_offset(3, 2, base_offset_of(20) - 1)
        .wait()
        .unwrap();
    assert!(
        engine
            .handle()
            .poll_next(3, 2, 1 << 20)
            .wait()
            .unwrap()
            .is_empty(),
        "consumer 2 read everything"
    );
    assert_eq!(
        engine.handle().load_offset(3, 1).wait().unwrap(),
        Some(base_offset_of(19) - 1)
    );
    engine.shutdown().unwrap();

    let engine = open(dir.path(), 3, small_segments());
    assert_eq!(
        engine.handle().load_offset(3, 1).wait().unwrap(),
        Some(base_offset_of(19) - 1)
    );
    assert_eq!(
        engine.handle().load_offset(3, 2).wait().unwrap(),
        Some(base_offset_of(20) - 1)
    );
    append_range(&engine, 3, 20, 21);
    let reply = engine.handle().poll_next(3, 2, 1 << 20).wait().unwrap();
    assert_eq!(
        (reply.first_offset(), reply.batch_count()),
        (base_offset_of(20), 1),
        "consumer 2 gets the new batch"
    );
    engine.shutdown().unwrap();
}

#[test]
fn requests_for_a_missing_partition_are_unknown_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    append_range(&engine, 1, 0, 1);
    let unknown = |r: Result<(), RequestError>, what: &str| {
        assert!(
            matches!(r, Err(RequestError::UnknownPartition { partition: 8 })),
            "{what}: {r:?}"
        )
    };
    for from in [
        PollFrom::First,
        PollFrom::Last,
        PollFrom::Offset(0),
        PollFrom::Timestamp(0),
    ] {
        unknown(
            engine.handle().poll(8, from, 1 << 20).wait().map(drop),
            "poll",
        );
        unknown(
            futures::executor::block_on(engine.handle().poll_verified(8, from, 1 << 20)).map(drop),
            "poll_verified",
        );
    }
    unknown(
        engine.handle().poll_next(8, 1, 1 << 20).wait().map(drop),
        "poll_next",
    );
    unknown(engine.handle().stats(8).wait().map(drop), "stats");
    unknown(
        engine.handle().load_offset(8, 1).wait().map(drop),
        "load_offset",
    );
    unknown(engine.handle().store_offset(8, 1, 0).wait(), "store_offset");
    unknown(engine.handle().flush(8).wait(), "flush");
    let err = engine
        .handle()
        .poll(8, PollFrom::First, 1)
        .wait()
        .unwrap_err();
    assert_eq!(err.to_string(), "partition 8 does not exist");
    assert_eq!(partitions(&engine), vec![1]);
    assert!(!dir.path().join("partitions/8").exists());
    // A partition that exists but holds nothing answers with an empty reply.
    engine.handle().create_partition(8).wait().unwrap();
    let reply = engine
        .handle()
        .poll(8, PollFrom::First, 1 << 20)
        .wait()
        .unwrap();
    assert!(reply.is_empty());
    assert_eq!(reply.next_offset(), 0);
    engine.shutdown().unwrap();
}

/// `batch(5, 1)` broken in one way each, with the error admission gives.
/// What is broken, the bytes, and whether an error is the one expected.
type Broken = (&'static str, Vec<u8>, fn(&BatchError) -> bool);

fn broken_batches() -> Vec<Broken> {
    let good = batch(5, 1);
    assert!(
        good.len() > 256 + 48 + 2,
        "the batch has a payload to damage"
    );
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    vec![
        ("empty", Vec::new(), |e| {
            matches!(e, BatchError::ShortHeader { len: 0 })
        }),
        ("header only", good[..256].to_vec(), |e| {
            matches!(e, BatchError::LengthMismatch { .. })
        }),
        ("cut short", good[..good.len() - 1].to_vec(), |e| {
            matches!(e, BatchError::LengthMismatch { .. })
        }),
        (
            "payload byte flipped",
            with(&|b| b[256 + 48 + 1] ^= 0x40),
            |e| matches!(e, BatchError::FrameChecksum { index: 0, .. }),
        ),
        ("reserved header byte", with(&|b| b[100] = 1), |e| {
            matches!(e, BatchError::ReservedHeaderByte { at: 100, value: 1 })
        }),
        ("batch checksum", with(&|b| b[40] ^= 1), |e| {
            matches!(e, BatchError::BatchChecksum { .. })
        }),
        (
            "batch_length below the header",
            with(&|b| b[32..40].copy_from_slice(&10u64.to_le_bytes())),
            |e| matches!(e, BatchError::LengthBelowHeader { declared: 10 }),
        ),
        ("trailing byte", with(&|b| b.push(0)), |e| {
            matches!(e, BatchError::LengthMismatch { .. })
        }),
    ]
}

#[test]
fn refused_batches_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    // Into a new partition: it is not even created.
    for (what, bytes, expected) in broken_batches() {
        match engine.handle().append(5, bytes).wait() {
            Err(RequestError::Admission {
                partition: 5,
                error,
            }) => assert!(expected(&error), "{what}: {error}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(partitions(&engine), Vec::<u64>::new());
    assert!(matches!(
        engine.handle().poll(5, PollFrom::First, 1).wait(),
        Err(RequestError::UnknownPartition { partition: 5 })
    ));

    // Into an existing partition: nothing changes, the next good batch
    // takes the next offset.
    append_range(&engine, 5, 0, 1);
    let before = engine.handle().stats(5).wait().unwrap();
    for (what, bytes, expected) in broken_batches() {
        match engine.handle().append(5, bytes).wait() {
            Err(RequestError::Admission {
                partition: 5,
                error,
            }) => assert!(expected(&error), "{what}: {error}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let after = engine.handle().stats(5).wait().unwrap();
    assert_eq!(
        (after.next_offset, after.bytes, after.appends),
        (before.next_offset, before.bytes, before.appends)
    );
    append_range(&engine, 5, 1, 2);
    check_contents(&engine, 5, 2);
    engine.shutdown().unwrap();
}

#[test]
fn append_admitted_refuses_a_batch_over_the_engine_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogConfig {
        limits: Limits {
            max_batch_bytes: 1024,
        },
        ..LogConfig::default()
    };
    let engine = open(dir.path(), 1, log);
    let big: Vec<u8> = {
        let mut b = corelog::BatchBuilder::new();
        b.push(corelog::MessageSpec {
            id: 1,
            timestamp: 1,
            payload: &[7u8; 2000],
            user_headers: b"",
        });
        b.build().unwrap()
    };
    // Admitted elsewhere, under the default limit.
    let admitted = Batch::admit(big.clone(), &Limits::default()).unwrap();
    match engine.handle().append_admitted(3, admitted).wait() {
        Err(RequestError::Admission {
            partition: 3,
            error:
                BatchError::TooLarge {
                    declared,
                    max: 1024,
                },
        }) => {
            assert_eq!(declared, big.len() as u64)
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        engine.handle().append(3, big).wait(),
        Err(RequestError::Admission {
            partition: 3,
            error: BatchError::TooLarge { .. }
        })
    ));
    assert_eq!(partitions(&engine), Vec::<u64>::new());
    engine.shutdown().unwrap();
}

#[test]
fn a_replica_stores_stamped_batches_verbatim_and_refuses_ones_that_do_not_continue() {
    let (leader_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = open(leader_dir.path(), 2, LogConfig::default());
    let replica = open(replica_dir.path(), 3, LogConfig::default());
    append_range(&leader, 4, 0, 6);
    let reply = leader
        .handle()
        .poll(4, PollFrom::First, 1 << 20)
        .wait()
        .unwrap();
    let stamped: Vec<Vec<u8>> = reply.batches().map(|b| b.as_bytes().to_vec()).collect();
    assert_eq!(stamped.len(), 6);
    for (seq, b) in stamped.iter().enumerate() {
        let ack = replica
            .handle()
            .append_stamped(4, b.clone())
            .wait()
            .unwrap();
        assert_eq!(ack.base_offset, base_offset_of(seq as u64));
        assert_eq!(u64::from(ack.message_count), messages_in(seq as u64));
    }
    let copy = replica
        .handle()
        .poll(4, PollFrom::First, 1 << 20)
        .wait()
        .unwrap();
    let mut leader_bytes = Vec::new();
    reply.write_to(&mut leader_bytes).unwrap();
    let mut replica_bytes = Vec::new();
    copy.write_to(&mut replica_bytes).unwrap();
    assert_eq!(
        replica_bytes, leader_bytes,
        "stored byte for byte as the leader stamped them"
    );

    let before = replica.handle().stats(4).wait().unwrap();
    // A batch already stored does not continue the log.
    assert!(matches!(
        replica.handle().append_stamped(4, stamped[2].clone()).wait(),
        Err(RequestError::Append(AppendError::OffsetMismatch { expected, found })) if expected == base_offset_of(6) && found == base_offset_of(2)
    ));
    // A producer batch is stamped for partition 0, not 4.
    assert!(matches!(
        replica.handle().append_stamped(4, batch(4, 6)).wait(),
        Err(RequestError::Append(AppendError::PartitionMismatch {
            expected: 4,
            found: 0
        }))
    ));
    let after = replica.handle().stats(4).wait().unwrap();
    assert_eq!(
        (after.next_offset, after.bytes),
        (before.next_offset, before.bytes)
    );
    leader.shutdown().unwrap();
    replica.shutdown().unwrap();
}

/// A replicated batch a new partition would refuse (stamped for another
/// partition, or not starting at offset 0) is refused without creating the
/// partition.
#[test]
fn a_refused_replicated_batch_does_not_create_its_partition() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let stamped = |partition_id: u64, base_offset: u64| {
        let mut bytes = batch(9, 0);
        corelog::testing::segment::stamp_in_place(
            &mut bytes,
            corelog::testing::segment::Stamp {
                partition_id,
                base_offset,
                base_timestamp: 1,
            },
            &Limits::default(),
        )
        .unwrap();
        bytes
    };
    let err = engine
        .handle()
        .append_stamped(9, stamped(9, 5))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::Append(AppendError::OffsetMismatch {
                expected: 0,
                found: 5
            })
        ),
        "{err}"
    );
    let err = engine
        .handle()
        .append_stamped(9, stamped(8, 0))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::Append(AppendError::PartitionMismatch {
                expected: 9,
                found: 8
            })
        ),
        "{err}"
    );
    assert!(partitions(&engine).is_empty());
    assert!(!dir.path().join("partitions/9").exists());
    let ack = engine
        .handle()
        .append_stamped(9, stamped(9, 0))
        .wait()
        .unwrap();
    assert_eq!(ack.base_offset, 0);
    engine.shutdown().unwrap();
}
