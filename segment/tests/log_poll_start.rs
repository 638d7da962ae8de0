//! A poll from an offset inside a batch serves the whole stored batch (the
//! wire and disk layout), and its messages start at the offset asked for:
//! callers never trim the earlier messages themselves.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{PartitionLog, PollFrom};

/// A new log of partition 5 under `pdir`, on the real ring.
async fn open_log(pdir: &std::path::Path) -> PartitionLog<UringStorage> {
    let storage = UringStorage::new(64).unwrap();
    PartitionLog::open(storage, pdir, 5, small_config())
        .await
        .unwrap()
        .0
}

#[test]
fn messages_start_at_the_offset_asked_for_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    run(async {
        let log = open_log(&pdir).await;
        // Three batches of 4 messages: offsets 0-3, 4-7, 8-11.
        for tag in 0..3 {
            log.append(batch(tag, 4, 50)).await.unwrap();
        }
        for from in 0..12u64 {
            let reply = log.poll(PollFrom::Offset(from), 1 << 20).unwrap();
            // Whole batches: the first is the one holding `from`.
            assert_eq!(reply.first_offset(), from / 4 * 4, "from {from}");
            assert_eq!(reply.start_offset(), from, "from {from}");
            let offsets: Vec<u64> = reply.messages().map(|m| m.offset()).collect();
            assert_eq!(offsets, (from..12).collect::<Vec<_>>(), "from {from}");
            // The bytes served are still whole stored batches.
            let batch_starts: Vec<u64> = reply.batches().map(|b| b.base_offset()).collect();
            assert_eq!(batch_starts.first(), Some(&(from / 4 * 4)));
            assert_eq!(reply.len(), reply.slices().map(|s| s.len() as u64).sum());
        }
        // Polls not by offset start at their first batch.
        let first = log.poll(PollFrom::First, 1 << 20).unwrap();
        assert_eq!(first.start_offset(), 0);
        assert_eq!(first.messages().count(), 12);
        let last = log.poll(PollFrom::Last, 1 << 20).unwrap();
        assert_eq!(
            last.messages().map(|m| m.offset()).collect::<Vec<_>>(),
            vec![8, 9, 10, 11]
        );
        // Trimming a reply further, and past its end.
        let r = log
            .poll(PollFrom::Offset(2), 1 << 20)
            .unwrap()
            .starting_at(9);
        assert_eq!(
            r.messages().map(|m| m.offset()).collect::<Vec<_>>(),
            vec![9, 10, 11]
        );
        let r = log
            .poll(PollFrom::Offset(2), 1 << 20)
            .unwrap()
            .starting_at(40);
        assert_eq!((r.start_offset(), r.messages().count()), (12, 0));
        // Below the reply's first offset: the first.
        let r = log
            .poll(PollFrom::Offset(6), 1 << 20)
            .unwrap()
            .starting_at(0);
        assert_eq!(r.start_offset(), 4);
        // Past the end: empty, starting at the end.
        let r = log.poll(PollFrom::Offset(30), 1 << 20).unwrap();
        assert!(r.is_empty());
        assert_eq!((r.start_offset(), r.messages().count()), (12, 0));
        log.close().await.unwrap();
    });
}

/// A reply over fetched bytes (a tier's chunk) is the same reply a mapped
/// poll gives, and damage in them is named by origin and byte, never served.
#[test]
fn a_reply_over_fetched_bytes_is_verified_before_it_is_served() {
    use corelog_segment::log::{Damage, LogError, PollReply};
    use corelog_segment::Limits;
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    let stored: Vec<u8> = run(async {
        let log = open_log(&pdir).await;
        for tag in 0..3 {
            log.append(batch(tag, 4, 50)).await.unwrap();
        }
        let r = log.poll(PollFrom::First, 1 << 20).unwrap();
        r.slices().flatten().copied().collect()
    });
    let origin = std::path::PathBuf::from("s3://b/p/partitions/5/seg.log");
    let limits = Limits::default();
    let r = PollReply::from_fetched(stored.clone().into(), origin.clone(), 1000, &limits).unwrap();
    assert_eq!(
        (r.first_offset(), r.next_offset(), r.batch_count()),
        (0, 12, 3)
    );
    assert_eq!(r.slices().flatten().copied().collect::<Vec<u8>>(), stored);
    assert!(
        r.slice_file(0).is_none(),
        "fetched bytes have no file to send from"
    );
    // A flipped payload byte in the second batch: named at its batch's
    // position in the origin, and no reply.
    let second = stored.len() / 3;
    let mut bad = stored.clone();
    bad[second + 300] ^= 1;
    match PollReply::from_fetched(bad.into(), origin.clone(), 1000, &limits) {
        Err(LogError::Corrupt { path, position, .. }) => {
            assert_eq!(path, origin);
            assert_eq!(position, 1000 + second as u64);
        }
        other => panic!("{other:?}"),
    }
    // A torn tail, and nothing at all.
    let torn = stored[..stored.len() - 10].to_vec();
    assert!(matches!(
        PollReply::from_fetched(torn.into(), origin.clone(), 0, &limits),
        Err(LogError::Corrupt {
            damage: Damage::TornBatch { .. } | Damage::Batch(_),
            ..
        })
    ));
    assert!(PollReply::from_fetched(Vec::new().into(), origin, 0, &limits).is_err());
}

/// Writes `bytes` over `ack`'s batch at `rel` bytes into it, in the segment
/// file of the log under `pdir` (under the open log's mapping); the file.
fn overwrite(
    pdir: &std::path::Path,
    ack: &corelog_segment::log::AppendAck,
    rel: usize,
    bytes: &[u8],
) -> std::path::PathBuf {
    use std::os::unix::fs::FileExt;
    let path = pdir.join(corelog_segment::log::log_name(ack.segment));
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(bytes, ack.position + rel as u64).unwrap();
    path
}

/// `ack`'s batch with its 256-byte header zeroed.
fn zero_header(
    pdir: &std::path::Path,
    ack: &corelog_segment::log::AppendAck,
) -> std::path::PathBuf {
    overwrite(pdir, ack, 0, &[0u8; 256])
}

/// Damage in visible bytes is never served silently: a poll that meets it
/// after whole batches serves those (the next poll starts at the damage),
/// and a poll that meets it first is an error naming the segment and the
/// byte, whichever way the poll starts (by offset, first, last).
#[test]
fn a_poll_serves_up_to_damage_and_names_it_when_it_starts_there() {
    use corelog_segment::log::LogError;
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    run(async {
        let log = open_log(&pdir).await;
        let mut acks = Vec::new();
        for tag in 0..4 {
            acks.push(log.append(batch(tag, 4, 50)).await.unwrap());
        }
        let named = |r: Result<corelog_segment::log::PollReply, LogError>| match r {
            Err(LogError::Corrupt { path, position, .. }) => (path, position),
            other => panic!("not an error naming the damage: {other:?}"),
        };
        // The second batch damaged: a poll from the first serves the first
        // alone; one from the second names the damage.
        let second = zero_header(&pdir, &acks[1]);
        let r = log.poll(PollFrom::Offset(0), 1 << 20).unwrap();
        assert_eq!(
            (r.batch_count(), r.first_offset(), r.next_offset()),
            (1, 0, 4)
        );
        assert_eq!(
            named(log.poll(PollFrom::Offset(4), 1 << 20)),
            (second.clone(), acks[1].position)
        );
        // The first batch damaged: a poll from the first batch, which no
        // index walk peeks at before serving, names it too.
        let first = zero_header(&pdir, &acks[0]);
        assert_eq!(
            named(log.poll(PollFrom::First, 1 << 20)),
            (first, acks[0].position)
        );
        // So does a poll of the last batch, once it is the damaged one.
        let last = zero_header(&pdir, &acks[3]);
        assert_eq!(
            named(log.poll(PollFrom::Last, 1 << 20)),
            (last, acks[3].position)
        );
        log.close().await.unwrap();
    });
}

/// What a zero-copy send (`sendfile`) of a reply relies on: each slice of a
/// mapped reply names its segment file and the slice's offset there, and
/// the file holds exactly the slice's bytes at it; past the last slice,
/// nothing.
#[test]
fn each_slice_names_the_file_bytes_it_is() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    run(async {
        let log = open_log(&pdir).await;
        // Enough to span segments of 16 KiB: 12 batches of ~2.2 KB.
        for tag in 0..12 {
            log.append(batch(tag, 4, 500)).await.unwrap();
        }
        for from in [0u64, 9, 30] {
            let r = log.poll(PollFrom::Offset(from), 1 << 20).unwrap();
            let slices: Vec<&[u8]> = r.slices().collect();
            assert!(from > 0 || slices.len() >= 2, "spans segments");
            for (i, s) in slices.iter().enumerate() {
                let (fd, at) = r.slice_file(i).expect("a mapped slice names its file");
                let f = std::fs::File::from(fd.try_clone_to_owned().unwrap());
                let mut on_disk = vec![0u8; s.len()];
                f.read_exact_at(&mut on_disk, at).unwrap();
                assert_eq!(&on_disk[..], *s, "slice {i} from {from}");
            }
            assert!(r.slice_file(slices.len()).is_none());
        }
        log.close().await.unwrap();
    });
}

/// A header whose one field lies is named, never followed: a batch length
/// running past the written bytes (a poll would serve bytes no append
/// wrote), one shorter than a header, a base offset that does not continue
/// the batch before. Each alone, the rest of the header intact.
#[test]
fn a_header_field_that_lies_is_named_not_followed() {
    use corelog_segment::format::layout::batch::{BASE_OFFSET, BATCH_LENGTH};
    use corelog_segment::log::{Damage, LogError};
    let lies: [(&str, std::ops::Range<usize>, u64); 3] = [
        ("a length past the end", BATCH_LENGTH, 1 << 20),
        ("a length under a header", BATCH_LENGTH, 100),
        ("another base offset", BASE_OFFSET, 40),
    ];
    for (what, field, value) in lies {
        let dir = tempfile::tempdir().unwrap();
        let pdir = dir.path().join("partitions/5");
        run(async {
            let log = open_log(&pdir).await;
            let mut acks = Vec::new();
            for tag in 0..3 {
                acks.push(log.append(batch(tag, 4, 50)).await.unwrap());
            }
            // The last batch lies: a poll from the first serves the two
            // before it, then names it.
            let path = overwrite(&pdir, &acks[2], field.start, &value.to_le_bytes());
            let r = log.poll(PollFrom::First, 1 << 20).unwrap();
            assert_eq!((r.batch_count(), r.next_offset()), (2, 8), "{what}");
            for from in [PollFrom::Offset(8), PollFrom::Last] {
                match log.poll(from, 1 << 20) {
                    Err(LogError::Corrupt {
                        path: p,
                        position,
                        damage,
                    }) => {
                        assert_eq!((p, position), (path.clone(), acks[2].position), "{what}");
                        let kind_ok = match damage {
                            Damage::TornBatch { .. } => field == BATCH_LENGTH,
                            Damage::OffsetGap { found, .. } => found == 40,
                            _ => false,
                        };
                        assert!(kind_ok, "{what}: {damage:?}");
                    }
                    other => panic!("{what} from {from:?}: {other:?}"),
                }
            }
            log.close().await.unwrap();
        });
    }
}

/// A poll that fills up at a segment's first batch holds no empty slice of
/// that segment: its slices are the segments it serves batches of.
#[test]
fn a_reply_full_at_a_segment_boundary_ends_there() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("partitions/5");
    run(async {
        let log = open_log(&pdir).await;
        let mut acks = Vec::new();
        for tag in 0..12 {
            acks.push(log.append(batch(tag, 4, 500)).await.unwrap());
        }
        let in_first: u64 = acks
            .iter()
            .filter(|a| a.segment == acks[0].segment)
            .map(|a| a.bytes)
            .sum();
        assert!(in_first < acks.iter().map(|a| a.bytes).sum::<u64>());
        let r = log.poll(PollFrom::First, in_first).unwrap();
        assert_eq!(r.len(), in_first);
        let lens: Vec<usize> = r.slices().map(<[u8]>::len).collect();
        assert_eq!(lens, vec![in_first as usize]);
        log.close().await.unwrap();
    });
}
