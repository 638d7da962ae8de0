//! Rotation and polls: where batches land when a segment fills, how sealed
//! segments are marked, and what polls return across segment boundaries.
//! Each scenario runs on real files (io_uring) and on the simulated disk.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage, Storage, UringStorage};
use corelog_segment::log::{
    index, index_name, log_name, FsyncPolicy, LogConfig, PartitionLog, PollFrom, PollReply,
};
use corelog_segment::{Batch, Limits};
use std::path::Path;

const P: u64 = 3;

fn config(segment_bytes: u64, index_interval_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        limits: Limits {
            max_batch_bytes: 64 << 10,
        },
        ..LogConfig::default()
    }
}

/// The seed of this file's simulated disk (see `on_both!`).
const SIM_SEED: u64 = 1;

/// 1 message of 600 bytes (plus its 3-byte user headers): 907 bytes.
const L: u64 = 907;

fn fixed(i: u64) -> Batch {
    let b = batch(i, 1, 600);
    assert_eq!(b.len() as u64, L);
    b
}

/// Appends `sent` one after another; returns the bytes each must be stored as.
async fn append_all<S: Storage>(log: &PartitionLog<S>, sent: &[Batch]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for b in sent {
        let ack = log.append(b.clone()).await.unwrap();
        out.push((
            ack.base_offset,
            stored_form(b, P, ack.base_offset, ack.base_timestamp),
        ));
    }
    out
}

/// Checks the files of a closed log whose segments each hold `per` fixed
/// batches: names, exact bytes, seal records of the sealed ones.
fn check_segment_files<D: Disk>(disk: &D, dir: &Path, stored: &[(u64, Vec<u8>)], per: usize) {
    let chunks: Vec<_> = stored.chunks(per).collect();
    let mut want_names = Vec::new();
    for c in &chunks {
        want_names.push(index_name(c[0].0));
        want_names.push(log_name(c[0].0));
    }
    // A cleanly closed log also holds its clean-close record.
    want_names.push(corelog_segment::log::CLEAN_RECORD.to_string());
    want_names.sort();
    assert_eq!(disk.names(dir), want_names);
    for (k, c) in chunks.iter().enumerate() {
        let base = c[0].0;
        assert_eq!(log_name(base), format!("{base:020}.log"));
        let bytes = disk.read(&dir.join(log_name(base))).unwrap();
        let want: Vec<u8> = c.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(bytes, want, "segment {base} holds exactly its batches");
        let (entries, seal) = index::decode_file(&disk.read(&dir.join(index_name(base))).unwrap());
        assert_eq!(
            (entries[0].rel_offset, entries[0].position),
            (0, 0),
            "segment {base}: the first batch is indexed"
        );
        let starts: Vec<u64> = (0..c.len() as u64).map(|j| j * L).collect();
        for e in &entries {
            assert!(
                starts.contains(&u64::from(e.position)),
                "segment {base}: entry {e:?} names a batch start"
            );
        }
        if k + 1 < chunks.len() {
            assert_eq!(
                seal,
                Some(index::Seal {
                    data_len: bytes.len() as u64,
                    next_offset: base + c.len() as u64,
                }),
                "segment {base} is sealed"
            );
        } else {
            assert_eq!(seal, None, "the active segment {base} is not sealed");
        }
    }
}

/// `segment_bytes` 4096 and 907-byte batches: 4 batches make 3628 bytes,
/// the 5th crosses 4096 and is written whole into the same segment
/// (4535 bytes); the 6th starts segment 5.
async fn the_batch_crossing_segment_bytes_is_written_whole_into_the_old_segment<
    S: Storage,
    D: Disk,
>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config(4096, 1024))
        .await
        .unwrap();
    let sent: Vec<_> = (0..12).map(fixed).collect();
    let mut stored = Vec::new();
    for (i, b) in sent.iter().enumerate() {
        let ack = log.append(b.clone()).await.unwrap();
        let i = i as u64;
        assert_eq!(
            (ack.base_offset, ack.segment, ack.position, ack.bytes),
            (i, i / 5 * 5, i % 5 * L, L),
            "batch {i}"
        );
        stored.push((i, stored_form(b, P, i, ack.base_timestamp)));
    }
    assert_eq!(log.stats().segments, 3);
    assert_eq!(
        log.segment_paths(),
        [0, 5, 10].map(|b| dir.join(log_name(b))).to_vec()
    );
    log.close().await.unwrap();
    check_segment_files(disk, dir, &stored, 5);
    assert_eq!(disk.read(&dir.join(log_name(0))).unwrap().len(), 4535);
}
on_both!(the_batch_crossing_segment_bytes_is_written_whole_into_the_old_segment);

/// A segment filled exactly to `segment_bytes` rotates on the next append.
async fn a_segment_filled_exactly_rotates_on_the_next_append<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config(4 * L, 1024))
        .await
        .unwrap();
    let sent: Vec<_> = (0..10).map(fixed).collect();
    let stored = append_all(&log, &sent[..4]).await;
    assert_eq!(
        log.stats().segments,
        1,
        "full, but nothing asked to rotate yet"
    );
    let mut stored2 = append_all(&log, &sent[4..]).await;
    assert_eq!(log.stats().segments, 3);
    log.close().await.unwrap();
    let mut all = stored;
    all.append(&mut stored2);
    check_segment_files(disk, dir, &all, 4);
    assert_eq!(
        disk.read(&dir.join(log_name(0))).unwrap().len() as u64,
        4 * L
    );
}
on_both!(a_segment_filled_exactly_rotates_on_the_next_append);

/// What a poll from `offset` with `max_bytes` must return, given every
/// stored batch.
fn expected_reply(stored: &[(u64, Vec<u8>)], offset: u64, max_bytes: u64) -> Vec<usize> {
    let next = |j: usize| {
        stored.get(j + 1).map(|s| s.0).unwrap_or_else(|| {
            stored[j].0
                + u64::from(
                    corelog_segment::check(&stored[j].1, &Limits::default())
                        .unwrap()
                        .message_count(),
                )
        })
    };
    let Some(first) = (0..stored.len()).find(|&j| offset < next(j)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut total = 0u64;
    for (j, (_, bytes)) in stored.iter().enumerate().skip(first) {
        let len = bytes.len() as u64;
        if !out.is_empty() && total + len > max_bytes {
            break;
        }
        total += len;
        out.push(j);
    }
    out
}

/// Checks a reply against the batches it must hold, in every form it
/// offers: batches, slices, io_slices, write_to, verify.
fn check_reply(
    reply: &PollReply,
    stored: &[(u64, Vec<u8>)],
    want: &[usize],
    log_next: u64,
    what: &str,
) {
    assert_eq!(reply.batch_count(), want.len(), "{what}: batch count");
    let bytes: Vec<u8> = want.iter().flat_map(|&j| stored[j].1.clone()).collect();
    assert_eq!(reply.len(), bytes.len() as u64, "{what}: length");
    if want.is_empty() {
        assert!(reply.is_empty(), "{what}");
        assert_eq!(reply.next_offset(), log_next, "{what}: empty reply");
        return;
    }
    assert_eq!(
        reply.first_offset(),
        stored[want[0]].0,
        "{what}: first offset"
    );
    let after = stored
        .get(want[want.len() - 1] + 1)
        .map(|s| s.0)
        .unwrap_or(log_next);
    assert_eq!(reply.next_offset(), after, "{what}: next offset");
    let views: Vec<Vec<u8>> = reply.batches().map(|b| b.as_bytes().to_vec()).collect();
    let want_views: Vec<Vec<u8>> = want.iter().map(|&j| stored[j].1.clone()).collect();
    assert_eq!(views, want_views, "{what}: whole batches, byte exact");
    let sliced: Vec<u8> = reply.slices().flatten().copied().collect();
    assert_eq!(sliced, bytes, "{what}: slices");
    let io: Vec<u8> = reply.io_slices().iter().flat_map(|s| s.to_vec()).collect();
    assert_eq!(io, bytes, "{what}: io_slices");
    let mut written = Vec::new();
    reply.write_to(&mut written).unwrap();
    assert_eq!(written, bytes, "{what}: write_to");
    reply.verify(&Limits::default()).unwrap();
}

async fn polls_across_segments_return_whole_batches_byte_exact<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config(2048, 512))
        .await
        .unwrap();
    let sent: Vec<_> = (0..30u64)
        .map(|i| batch(i, 1 + (i as usize % 3), 50 + (i as usize * 73) % 500))
        .collect();
    let futs: Vec<_> = sent.iter().map(|b| log.append(b.clone())).collect();
    let mut stored = Vec::new();
    for (f, b) in futs.into_iter().zip(&sent) {
        let ack = f.await.unwrap();
        stored.push((
            ack.base_offset,
            stored_form(b, P, ack.base_offset, ack.base_timestamp),
        ));
    }
    let next = log.next_offset();
    assert!(log.stats().segments >= 4, "{:?}", log.stats());
    let mut widest = 0;
    let starts: Vec<u64> = (0..next + 2).collect();
    for &o in &starts {
        for max in [0, 1, 400, 1500, 3000, 8000, u64::MAX] {
            let reply = log.poll(PollFrom::Offset(o), max).unwrap();
            let want = expected_reply(&stored, o, max);
            check_reply(
                &reply,
                &stored,
                &want,
                next,
                &format!("offset {o} max {max}"),
            );
            if max > 0 && reply.batch_count() > 1 {
                assert!(reply.len() <= max, "offset {o}: max_bytes {max} respected");
            }
            widest = widest.max(reply.slices().count());
        }
    }
    assert!(widest >= 3, "some polls spanned 3+ segments: {widest}");
    // First and Last.
    let first = log.poll(PollFrom::First, u64::MAX).unwrap();
    check_reply(
        &first,
        &stored,
        &(0..stored.len()).collect::<Vec<_>>(),
        next,
        "first",
    );
    let last = log.poll(PollFrom::Last, u64::MAX).unwrap();
    check_reply(&last, &stored, &[stored.len() - 1], next, "last");
    // The same after a reopen, served from what recovery found.
    log.close().await.unwrap();
    let (log, report) = PartitionLog::open(storage(), dir, P, config(2048, 512))
        .await
        .unwrap();
    assert_eq!(report.cut, None);
    for &o in &starts {
        for max in [0, 3000, u64::MAX] {
            let reply = log.poll(PollFrom::Offset(o), max).unwrap();
            let want = expected_reply(&stored, o, max);
            check_reply(
                &reply,
                &stored,
                &want,
                next,
                &format!("reopened: offset {o} max {max}"),
            );
        }
    }
}
on_both!(polls_across_segments_return_whole_batches_byte_exact);

async fn a_poll_from_inside_a_batch_returns_that_batch<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config(2048, 256))
        .await
        .unwrap();
    let sent: Vec<_> = (0..12u64).map(|i| batch(i, 7, 40)).collect();
    let stored = append_all(&log, &sent).await;
    for (j, (base, bytes)) in stored.iter().enumerate() {
        for o in *base..base + 7 {
            let reply = log.poll(PollFrom::Offset(o), 0).unwrap();
            check_reply(
                &reply,
                &stored,
                &[j],
                log.next_offset(),
                &format!("offset {o}"),
            );
            assert_eq!(reply.batches().next().unwrap().as_bytes(), &bytes[..]);
        }
    }
}
on_both!(a_poll_from_inside_a_batch_returns_that_batch);

/// Batches stamped by a leader with chosen timestamps, two by two equal.
async fn a_poll_by_timestamp_returns_the_first_batch_at_or_after_it<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let config = config(2048, 256);
    let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap();
    let ts = |i: u64| 5_000 + 10 * (i / 2);
    let mut stored = Vec::new();
    let mut next = 0;
    for i in 0..40u64 {
        let b = stamped(i, 2, 100, P, next, ts(i));
        let ack = log.append_stamped(b.clone()).await.unwrap();
        assert_eq!((ack.base_offset, ack.base_timestamp), (next, ts(i)));
        stored.push((next, b.as_ref().as_bytes().to_vec()));
        next += 2;
    }
    assert!(log.stats().segments >= 4);
    let check = |log: &PartitionLog<S>, what: &str| {
        for t in (4_990..ts(39) + 15).step_by(3) {
            let reply = log.poll(PollFrom::Timestamp(t), 0).unwrap();
            let want: Vec<usize> = (0..40).find(|&i| ts(i as u64) >= t).into_iter().collect();
            check_reply(
                &reply,
                &stored,
                &want,
                next,
                &format!("{what}: timestamp {t}"),
            );
        }
    };
    check(&log, "open");
    log.close().await.unwrap();
    let (log, _) = PartitionLog::open(storage(), dir, P, config).await.unwrap();
    check(&log, "reopened");
}
on_both!(a_poll_by_timestamp_returns_the_first_batch_at_or_after_it);

async fn polls_of_an_empty_log_and_past_the_end_are_empty<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let (log, _) = PartitionLog::open(storage(), dir, P, config(2048, 256))
        .await
        .unwrap();
    for from in [
        PollFrom::First,
        PollFrom::Last,
        PollFrom::Offset(0),
        PollFrom::Offset(5),
        PollFrom::Timestamp(0),
    ] {
        let reply = log.poll(from, u64::MAX).unwrap();
        assert!(reply.is_empty(), "{from:?}");
        assert_eq!((reply.next_offset(), reply.len()), (0, 0), "{from:?}");
        assert_eq!(reply.slices().count(), 0);
    }
    let sent: Vec<_> = (0..10).map(fixed).collect();
    append_all(&log, &sent).await;
    for o in [10, 11, 1000, u64::MAX] {
        let reply = log.poll(PollFrom::Offset(o), u64::MAX).unwrap();
        assert!(reply.is_empty(), "offset {o}");
        assert_eq!(reply.next_offset(), 10, "offset {o}: the log's end");
    }
    let reply = log.poll(PollFrom::Timestamp(u64::MAX), 0).unwrap();
    assert!(reply.is_empty());
    assert_eq!(reply.next_offset(), 10);
    let last = log.poll(PollFrom::Last, u64::MAX).unwrap();
    assert_eq!((last.first_offset(), last.batch_count()), (9, 1));
}
on_both!(polls_of_an_empty_log_and_past_the_end_are_empty);

/// Regression: sealing wrote the seal record without a directory sync, so
/// after a power cut the record could vouch for a segment whose successor's
/// name was lost while a later segment's name survived: recovery saw a
/// confirmed segment followed by an offset gap and refused to open the log.
/// Every directory sync is held here, so no name is ever durable but the
/// first segment's: every power cut must still leave a log that opens.
#[test]
fn regression_a_seal_record_never_vouches_for_names_a_power_cut_can_lose() {
    run_sim(async {
        let config = LogConfig {
            fsync: FsyncPolicy::Never,
            ..config(2048, 512)
        };
        let gated = GatedStorage::new(sim_for(5, &config));
        let dir = Path::new("/p");
        let (log, _) = PartitionLog::open(gated.clone(), dir, P, config.clone())
            .await
            .unwrap();
        gated.hold_dir_syncs();
        gated.disk.set_faults(SimFaults {
            max_yields: 2,
            ..SimFaults::default()
        });
        let futs: Vec<_> = (0..20).map(|i| log.append(fixed(i))).collect();
        for f in futs {
            f.await.unwrap();
        }
        for _ in 0..100 {
            yield_to_others().await;
        }
        assert!(log.stats().segments >= 5);
        for copy in 0..200 {
            let cut = gated.disk.crash();
            if let Err(e) = PartitionLog::open(cut.clone(), dir, P, config.clone()).await {
                panic!(
                    "power cut {copy}: the log does not open: {e}; files {:?}",
                    cut.files()
                );
            }
        }
        gated.release();
        log.close().await.unwrap();
    });
}

/// Regression: `append` took any admitted batch, also one larger than the
/// log's own `limits.max_batch_bytes`. Segments are mapped at
/// `segment_bytes + max_batch_bytes`, so such a batch was acknowledged but
/// could not be served (its bytes lie past the mapping) and recovery cut it
/// as too large: acknowledged data lost on the next open. It must be
/// refused, leaving the log as it was.
async fn a_batch_over_the_logs_limit_is_refused<S: Storage, D: Disk>(
    storage: impl Fn() -> S,
    _disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        limits: Limits {
            max_batch_bytes: 8 << 10,
        },
        ..config(4096, 1024)
    };
    let (log, _) = PartitionLog::open(storage(), dir, P, config.clone())
        .await
        .unwrap();
    let before = append_all(&log, &[fixed(0), fixed(1)]).await;
    let big = batch(7, 4, 3000); // about 12.3 KiB: admitted by default limits
    assert!(big.len() as u64 > config.limits.max_batch_bytes);
    let stamped_big = stamped(8, 4, 3000, P, 2, u64::MAX / 2);
    for result in [log.append(big).await, log.append_stamped(stamped_big).await] {
        match result {
            Err(e) => assert!(
                e.to_string().contains("8192"),
                "the error names the limit: {e}"
            ),
            Ok(ack) => panic!("a batch over the log's limit was acknowledged: {ack:?}"),
        }
    }
    assert_eq!(log.next_offset(), 2);
    let after = append_all(&log, &[fixed(2)]).await;
    assert_eq!(after[0].0, 2, "the log goes on where it was");
    log.close().await.unwrap();
    let (log, report) = PartitionLog::open(storage(), dir, P, config).await.unwrap();
    assert_eq!(report.cut, None, "{report}");
    let mut want = before;
    want.extend(after);
    assert_eq!(read_all(&log), want);
}
on_both!(a_batch_over_the_logs_limit_is_refused);

/// An active segment's index file is kept up to date while the log runs
/// (every 256 durable entries), not only written at the seal: a crash
/// leaves it holding the entries a tail-checked recovery starts from. With
/// an entry per batch, 600 durable batches put at least 512 entries in the
/// file before the log closes, each naming its batch.
async fn an_active_segments_index_file_holds_its_durable_entries_while_the_log_runs<
    S: Storage,
    D: Disk,
>(
    storage: impl Fn() -> S,
    disk: &D,
    dir: &Path,
) {
    let config = LogConfig {
        fsync: FsyncPolicy::Batch,
        ..config(1 << 20, 1)
    };
    let (log, _) = PartitionLog::open(storage(), dir, P, config).await.unwrap();
    for i in 0..600 {
        log.append(fixed(i)).await.unwrap();
    }
    // The flushes are tasks of their own: let them write.
    let path = dir.join(index_name(0));
    let mut entries = Vec::new();
    for _ in 0..10_000 {
        entries = index::decode_all(&disk.read(&path).unwrap_or_default());
        if entries.len() >= 512 {
            break;
        }
        yield_to_others().await;
    }
    assert!(
        (512..=600).contains(&entries.len()),
        "{} entries in the active segment's index file",
        entries.len()
    );
    for (k, e) in entries.iter().enumerate() {
        assert_eq!(
            (u64::from(e.rel_offset), u64::from(e.position)),
            (k as u64, k as u64 * L),
            "entry {k}"
        );
    }
    log.close().await.unwrap();
}
on_both!(an_active_segments_index_file_holds_its_durable_entries_while_the_log_runs);
