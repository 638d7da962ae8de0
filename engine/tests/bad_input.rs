//! Every way a producer batch can break `message-batches.md`, refused by
//! the API (`RequestError::Admission` with the matching `BatchError`) and by the
//! CLI (`corelog append` exits 2 and names the batch and what is wrong),
//! with the log unchanged: stats and polled bytes before and after are
//! identical, and a new partition is not even created.
//!
//! `cli.rs` and `reopen.rs` already cover a few of these (frame checksum,
//! reserved header byte, `batch_length` below the header and over the
//! limit, a cut stream, a batch checksum); this is the whole list, on both
//! paths: lengths (short, long, huge, over the configured limit), counts
//! (zero, too many, one too many, one too few), reserved bytes (header and
//! frame), checksums (frame, batch, a header field under the batch
//! checksum), `offset_delta`, frame lengths, truncation, and a producer
//! time past `u64`.
#![allow(clippy::unwrap_used)]

mod common;

use common::{corelog, open, serial};
use corelog::replication::ReplicaLog;
use corelog::testing::segment::set_origin_timestamp;
use corelog::{
    BatchBuilder, BatchError, Engine, Limits, LogConfig, MessageSpec, PollFrom, RequestError,
};
use std::path::Path;

/// A valid producer batch of three messages (payloads of 100, 60 and 80
/// bytes), made with `seed` so batches differ.
fn good(seed: u8) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = [100usize, 60, 80]
        .iter()
        .map(|&n| (0..n).map(|i| (i as u8).wrapping_mul(seed | 1)).collect())
        .collect();
    let mut b = BatchBuilder::new();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: u128::from(seed) << 8 | i as u128,
            timestamp: 1_700_000_000_000_000 + i as u64,
            payload: p,
            user_headers: if i == 1 { b"k=v" } else { b"" },
        });
    }
    b.build().unwrap()
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Byte position of each frame of a valid batch.
fn frames(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 256;
    while pos < b.len() {
        out.push(pos);
        let payload = u32::from_le_bytes(b[pos + 36..pos + 40].try_into().unwrap()) as usize;
        let headers = u32::from_le_bytes(b[pos + 32..pos + 36].try_into().unwrap()) as usize;
        pos += 48 + payload + headers;
    }
    out
}

/// One broken batch: what is broken, its bytes, whether the API's error is
/// the right one, and what the CLI says about the same bytes.
struct Case {
    what: &'static str,
    bytes: Vec<u8>,
    api: fn(&BatchError) -> bool,
    cli: &'static str,
}

fn cases() -> Vec<Case> {
    let g = good(7);
    let len = g.len();
    let f = frames(&g);
    assert_eq!(f.len(), 3);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = g.clone();
        edit(&mut b);
        b
    };
    vec![
        // Lengths.
        Case {
            what: "batch_length below the header size",
            bytes: with(&|b| put_u64(b, 32, 100)),
            api: |e| matches!(e, BatchError::LengthBelowHeader { declared: 100 }),
            cli: "batch_length is 100, below the 256-byte header size",
        },
        Case {
            what: "batch_length longer than the batch",
            bytes: with(&|b| put_u64(b, 32, len as u64 + 64)),
            api: |e| matches!(e, BatchError::LengthMismatch { declared, actual } if *declared == *actual as u64 + 64),
            cli: "but the stream ends after",
        },
        Case {
            what: "batch_length shorter than the batch",
            bytes: with(&|b| put_u64(b, 32, len as u64 - 10)),
            api: |e| matches!(e, BatchError::LengthMismatch { declared, actual } if *declared + 10 == *actual as u64),
            cli: "run 10 bytes past the end of the batch",
        },
        Case {
            what: "batch_length huge",
            bytes: with(&|b| put_u64(b, 32, u64::MAX)),
            api: |e| {
                matches!(
                    e,
                    BatchError::TooLarge {
                        declared: u64::MAX,
                        ..
                    }
                )
            },
            cli: "over the 67108864-byte batch size limit",
        },
        // Counts.
        Case {
            what: "message_count zero",
            bytes: with(&|b| put_u32(b, 48, 0)),
            api: |e| matches!(e, BatchError::Empty),
            cli: "message_count is 0",
        },
        Case {
            what: "message_count more than the blob can hold",
            bytes: with(&|b| put_u32(b, 48, u32::MAX)),
            api: |e| {
                matches!(
                    e,
                    BatchError::CountTooLarge {
                        count: u32::MAX,
                        ..
                    }
                )
            },
            cli: "cannot fit in a blob",
        },
        Case {
            what: "message_count one more than the frames",
            bytes: with(&|b| put_u32(b, 48, 4)),
            api: |e| {
                matches!(
                    e,
                    BatchError::MissingFrames {
                        declared: 4,
                        found: 3
                    }
                )
            },
            cli: "message_count is 4 but the batch ends after 3 frames",
        },
        Case {
            what: "message_count one less than the frames",
            bytes: with(&|b| put_u32(b, 48, 2)),
            api: |e| matches!(e, BatchError::TrailingBytes { count: 2, .. }),
            cli: "follow the last of 2 frames",
        },
        // Reserved bytes.
        Case {
            what: "a reserved header byte",
            bytes: with(&|b| b[255] = 0x80),
            api: |e| {
                matches!(
                    e,
                    BatchError::ReservedHeaderByte {
                        at: 255,
                        value: 0x80
                    }
                )
            },
            cli: "header byte 255 is 0x80",
        },
        Case {
            what: "a frame's reserved bytes",
            bytes: with(&|b| b[f[1] + 47] = 1),
            api: |e| matches!(e, BatchError::FrameReserved { index: 1, .. }),
            cli: "reserved is 0x100000000000000, must be zero",
        },
        // Checksums.
        Case {
            what: "a payload byte under the frame checksum",
            bytes: with(&|b| b[f[2] + 48 + 5] ^= 0x10),
            api: |e| matches!(e, BatchError::FrameChecksum { index: 2, .. }),
            cli: "frame 2 at byte",
        },
        Case {
            what: "a frame id under the frame checksum",
            bytes: with(&|b| b[f[0] + 8] ^= 1),
            api: |e| matches!(e, BatchError::FrameChecksum { index: 0, .. }),
            cli: "but the frame hashes to",
        },
        Case {
            what: "the batch checksum",
            bytes: with(&|b| b[40] ^= 1),
            api: |e| matches!(e, BatchError::BatchChecksum { .. }),
            cli: "batch_checksum is",
        },
        Case {
            what: "a frame checksum (covered by the batch checksum)",
            bytes: with(&|b| b[f[1]] ^= 1),
            api: |e| matches!(e, BatchError::FrameChecksum { index: 1, .. }),
            cli: "frame 1 at byte",
        },
        Case {
            what: "origin_timestamp under the batch checksum",
            bytes: with(&|b| b[24] ^= 1),
            api: |e| matches!(e, BatchError::BatchChecksum { .. }),
            cli: "batch_checksum is",
        },
        // offset_delta.
        Case {
            what: "an offset_delta that is not the frame's index",
            bytes: with(&|b| put_u32(b, f[2] + 24, 5)),
            api: |e| {
                matches!(
                    e,
                    BatchError::OffsetDelta {
                        index: 2,
                        stored: 5,
                        ..
                    }
                )
            },
            cli: "offset_delta is 5, must equal the frame's index 2",
        },
        // Frame lengths.
        Case {
            what: "a payload_length past the end of the batch",
            bytes: with(&|b| put_u32(b, f[2] + 36, 10_000)),
            api: |e| {
                matches!(
                    e,
                    BatchError::FrameBodyTruncated {
                        index: 2,
                        payload_length: 10_000,
                        ..
                    }
                )
            },
            cli: "payload_length 10000",
        },
        Case {
            what: "a user_headers_length past the end of the batch",
            bytes: with(&|b| put_u32(b, f[0] + 32, u32::MAX)),
            api: |e| {
                matches!(
                    e,
                    BatchError::FrameBodyTruncated {
                        index: 0,
                        user_headers_length: u32::MAX,
                        ..
                    }
                )
            },
            cli: "user_headers_length 4294967295",
        },
        Case {
            what: "a frame header cut by the end of the batch",
            bytes: with(&|b| {
                b.extend_from_slice(&[0u8; 20]);
                let n = b.len() as u64;
                put_u64(b, 32, n);
                put_u32(b, 48, 4);
            }),
            api: |e| {
                matches!(
                    e,
                    BatchError::FrameHeaderTruncated {
                        index: 3,
                        available: 20,
                        ..
                    }
                )
            },
            cli: "its 48-byte header runs past the end of the batch (20 bytes remain)",
        },
        // Truncation.
        Case {
            what: "cut inside the header",
            bytes: g[..100].to_vec(),
            api: |e| matches!(e, BatchError::ShortHeader { len: 100 }),
            cli: "the stream ends after 100 of the 256 header bytes",
        },
        Case {
            what: "cut inside the frames",
            bytes: g[..len - 7].to_vec(),
            api: |e| matches!(e, BatchError::LengthMismatch { declared, actual } if *declared == *actual as u64 + 7),
            cli: "but the stream ends after",
        },
        // Producer time.
        Case {
            what: "a producer time past u64",
            bytes: with(&|b| set_origin_timestamp(b, u64::MAX - 1).unwrap()),
            api: |e| {
                matches!(
                    e,
                    BatchError::TimestampOverflow {
                        index: 2,
                        delta: 2,
                        ..
                    }
                )
            },
            cli: "overflows a u64",
        },
    ]
}

/// Everything the engine would tell about partition `p`: its stats and its
/// bytes.
fn state(engine: &Engine, p: u64) -> (u64, u64, u64, usize, Vec<u8>) {
    let s = engine.handle().stats(p).wait().unwrap();
    let mut bytes = Vec::new();
    engine
        .handle()
        .poll(p, PollFrom::First, 1 << 30)
        .wait()
        .unwrap()
        .write_to(&mut bytes)
        .unwrap();
    (s.next_offset, s.bytes, s.appends, s.segments, bytes)
}

fn partitions(engine: &Engine) -> Vec<u64> {
    futures::executor::block_on(engine.handle().partitions()).unwrap()
}

#[test]
fn the_api_refuses_every_broken_batch_with_its_error_and_changes_nothing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    for seed in 0..3 {
        engine.handle().append(4, good(seed)).wait().unwrap();
    }
    let before = state(&engine, 4);
    for c in cases() {
        for p in [4u64, 9] {
            for (how, result) in [
                ("append", engine.handle().append(p, c.bytes.clone()).wait()),
                (
                    "append_stamped",
                    engine.handle().append_stamped(p, c.bytes.clone()).wait(),
                ),
            ] {
                match result {
                    Err(RequestError::Admission {
                        partition,
                        ref error,
                    }) if partition == p => {
                        assert!(
                            (c.api)(error),
                            "{}: {how} to {p}: wrong error: {error:?}",
                            c.what
                        )
                    }
                    other => panic!("{}: {how} to {p}: {other:?}", c.what),
                }
            }
        }
        assert_eq!(
            state(&engine, 4),
            before,
            "{}: the log is unchanged",
            c.what
        );
        assert_eq!(
            partitions(&engine),
            vec![4],
            "{}: no partition created",
            c.what
        );
    }
    // And the log goes on.
    let ack = engine.handle().append(4, good(3)).wait().unwrap();
    assert_eq!(ack.base_offset, before.0);
    engine.shutdown().unwrap();
}

#[test]
fn a_batch_over_the_configured_limit_is_refused_on_every_append_path() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let limit = 1024;
    let log = LogConfig {
        limits: Limits {
            max_batch_bytes: limit,
        },
        ..LogConfig::default()
    };
    let engine = open(dir.path(), 1, log);
    let fits = {
        let mut b = BatchBuilder::new();
        b.push(MessageSpec {
            id: 1,
            timestamp: 1,
            payload: &[1u8; 100],
            user_headers: b"",
        });
        b.build().unwrap()
    };
    engine.handle().append(2, fits).wait().unwrap();
    let before = state(&engine, 2);
    let big = {
        let mut b = BatchBuilder::new();
        b.push(MessageSpec {
            id: 2,
            timestamp: 2,
            payload: &[2u8; 1024],
            user_headers: b"",
        });
        b.build().unwrap()
    };
    let declared = big.len() as u64;
    let admitted = corelog::Batch::admit(big.clone(), &Limits::default()).unwrap();
    for (how, result) in [
        ("append", engine.handle().append(2, big.clone()).wait()),
        (
            "append_stamped",
            engine.handle().append_stamped(2, big.clone()).wait(),
        ),
        (
            "append_admitted",
            engine.handle().append_admitted(2, admitted).wait(),
        ),
    ] {
        assert!(
            matches!(
                result,
                Err(RequestError::Admission { partition: 2, error: BatchError::TooLarge { declared: d, max } })
                    if d == declared && max == limit
            ),
            "{how}: {result:?}"
        );
    }
    assert_eq!(state(&engine, 2), before);
    engine.shutdown().unwrap();
}

#[test]
fn server_fields_a_producer_fills_in_are_overwritten_not_stored() {
    let _serial = serial();
    // The spec says producers send zeros there; a producer that does not
    // is not refused (the batch checksum covers its values), but the
    // server's stamp replaces them.
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, LogConfig::default());
    engine.handle().append(3, good(1)).wait().unwrap();
    let mut odd = good(2);
    corelog::testing::segment::stamp_in_place(
        &mut odd,
        corelog::testing::segment::Stamp {
            partition_id: 99,
            base_offset: 12_345,
            base_timestamp: 1,
        },
        &Limits::default(),
    )
    .unwrap();
    let ack = engine.handle().append(3, odd.clone()).wait().unwrap();
    assert_eq!(ack.base_offset, 3);
    let reply = engine
        .handle()
        .poll(3, PollFrom::Offset(3), 1)
        .wait()
        .unwrap();
    let b = reply.batches().next().unwrap();
    assert_eq!((b.partition_id(), b.base_offset()), (3, 3));
    assert!(b.base_timestamp() > 1);
    assert_eq!(b.blob(), &odd[256..]);
    drop(reply);
    engine.shutdown().unwrap();
}

fn cli_state(dir: &Path, p: u64) -> Vec<u8> {
    let out = corelog(
        &[
            "poll",
            "--dir",
            dir.to_str().unwrap(),
            "--partition",
            &p.to_string(),
            "--first",
            "--max-bytes",
            "1GiB",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_cli_refuses_every_broken_batch_exits_3_and_changes_nothing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let append = |input: &[u8]| corelog(&["append", "--dir", d, "--partition", "4"], input);
    let first = [good(0), good(1)].concat();
    assert!(append(&first).status.success());
    let before = cli_state(dir.path(), 4);
    assert_eq!(before.len(), first.len());
    for c in cases() {
        // The broken batch alone, and followed by a good one (for the
        // framing cases the good one's bytes are read as part of it).
        for (how, input) in [
            ("alone", c.bytes.clone()),
            ("then a good batch", [c.bytes.clone(), good(5)].concat()),
        ] {
            let out = append(&input);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{} ({how})", c.what);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{what}: exit 3; stderr: {stderr}"
            );
            assert!(
                stderr.contains("batch 0"),
                "{what}: names the batch: {stderr}"
            );
            if how == "alone" || !c.cli.contains("stream ends") {
                assert!(stderr.contains(c.cli), "{what}: says {:?}: {stderr}", c.cli);
            }
            assert!(out.stdout.is_empty(), "{what}: nothing acknowledged");
            assert_eq!(
                cli_state(dir.path(), 4),
                before,
                "{what}: the log is unchanged"
            );
        }
    }
    let verify = corelog(&["verify", "--dir", d], b"");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    // A new partition is not created by a refused first batch.
    for c in cases() {
        let out = corelog(&["append", "--dir", d, "--partition", "8"], &c.bytes);
        assert_eq!(out.status.code(), Some(3), "{}", c.what);
    }
    assert!(!dir
        .path()
        .join("partitions/8")
        .join("00000000000000000000.log")
        .exists());
}
