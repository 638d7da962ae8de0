//! What admission costs against what hashing costs.
//!
//! For ~1 MiB batches at several message sizes, four groups, all reported as
//! bytes of batch per second:
//!
//! - `check`: the whole admission check (layout walk, every frame checksum,
//!   the batch checksum);
//! - `xxh3_whole`: one XXH3-64 call over the same batch bytes, the ceiling no
//!   checksumming admission can beat;
//! - `xxh3_per_frame`: one XXH3-64 call per frame over exactly the bytes the
//!   frame checksum covers, the ceiling this format imposes (one hash per
//!   frame, so the per-call overhead counts for small messages);
//! - `stamped_header`: restamping an admitted batch (hashes the 44 header
//!   bytes and N frame checksums, not the blob).
//!
//! The xxh3 SIMD path is fixed at compile time (see `checksum::simd_path`);
//! it is printed first so that runs of AVX2 and SSE2 builds are told apart.
//! Compare with `RUSTFLAGS="-C target-cpu=x86-64"` (SSE2; overrides
//! `.cargo/config.toml`) in a separate `CARGO_TARGET_DIR`. XXH3 hashes inputs
//! of at most 240 bytes with scalar code, so at 100-byte messages the SIMD
//! path changes nothing and the per-frame call dominates; the AVX2 gain shows
//! only where frames are large.
//!
//! Each group runs at a different time, so on a shared machine compare
//! groups only across repeated runs.

#![allow(clippy::unwrap_used)]

use corelog_segment::checksum::{simd_path, xxh3};
use corelog_segment::layout::{frame, BATCH_HEADER_LEN, FRAME_HEADER_LEN};
use corelog_segment::{check, stamped_header, Batch, BatchBuilder, Limits, MessageSpec, Stamp};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::ops::Range;

const MIB: usize = 1 << 20;

/// A batch of about 1 MiB: as many `message_size`-byte messages as fit.
struct Case {
    label: String,
    bytes: Vec<u8>,
    /// The bytes each frame checksum covers (frame header from byte 8 on,
    /// payload, user headers).
    checksummed: Vec<Range<usize>>,
}

fn case(message_size: usize, label: &str) -> Case {
    let per_frame = FRAME_HEADER_LEN + message_size;
    let count = ((MIB - BATCH_HEADER_LEN) / per_frame).max(1);
    let payload: Vec<u8> = (0..message_size)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
        .collect();
    let mut b = BatchBuilder::with_capacity(count * per_frame);
    for i in 0..count {
        b.push(MessageSpec {
            id: i as u128,
            timestamp: 1_764_000_000_000_000 + i as u64,
            payload: &payload,
            user_headers: b"",
        });
    }
    let bytes = b.build().unwrap();
    let checksummed = check(&bytes, &Limits::default())
        .unwrap()
        .messages()
        .map(|m| {
            let start = m.frame_bytes().as_ptr() as usize - bytes.as_ptr() as usize;
            start + frame::CHECKSUMMED_FROM..start + m.frame_bytes().len()
        })
        .collect();
    Case {
        label: format!("{label}/{count}msgs"),
        bytes,
        checksummed,
    }
}

fn cases() -> Vec<Case> {
    vec![
        case(100, "msg100B"),
        case(1000, "msg1000B"),
        case(16384, "msg16KiB"),
        // One message filling a 1 MiB batch exactly.
        case(MIB - BATCH_HEADER_LEN - FRAME_HEADER_LEN, "msg1MiB"),
    ]
}

fn admission(c: &mut Criterion) {
    eprintln!(
        "xxh3 SIMD path of this build: {} (cpu supports it: {})",
        simd_path(),
        corelog_segment::checksum::cpu_supports_build()
    );
    let cases = cases();
    let limits = Limits::default();
    let stamp = Stamp {
        partition_id: 7,
        base_offset: 1 << 32,
        base_timestamp: 1_764_000_000_123_456,
    };

    let mut g = c.benchmark_group("check");
    for case in &cases {
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&case.label), case, |b, case| {
            b.iter(|| {
                check(black_box(&case.bytes), &limits)
                    .unwrap()
                    .message_count()
            })
        });
    }
    g.finish();

    // The append path's admission: `check` plus the frame checksums kept
    // for the stamp (one allocation of 44 + 8 × N bytes).
    let mut g = c.benchmark_group("admit");
    for case in &cases {
        let bytes = bytes::Bytes::from(case.bytes.clone());
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(&case.label),
            &bytes,
            |b, bytes| {
                b.iter(|| {
                    Batch::admit(black_box(bytes.clone()), &limits)
                        .unwrap()
                        .len()
                })
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("xxh3_whole");
    for case in &cases {
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&case.label), case, |b, case| {
            b.iter(|| xxh3(black_box(&case.bytes)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("xxh3_per_frame");
    for case in &cases {
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&case.label), case, |b, case| {
            b.iter(|| {
                let bytes = black_box(&case.bytes);
                case.checksummed
                    .iter()
                    .fold(0u64, |acc, r| acc ^ xxh3(&bytes[r.clone()]))
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("stamped_header");
    for case in &cases {
        let batch = check(&case.bytes, &limits).unwrap();
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(&case.label),
            &batch,
            |b, batch| b.iter(|| stamped_header(black_box(*batch), black_box(stamp))),
        );
    }
    g.finish();

    // The append path's stamp: from the checksums admission kept.
    let mut g = c.benchmark_group("stamped_header_admitted");
    for case in &cases {
        let mut batch = Batch::admit(case.bytes.clone(), &limits).unwrap();
        g.throughput(Throughput::Bytes(case.bytes.len() as u64));
        g.bench_function(BenchmarkId::from_parameter(&case.label), |b| {
            b.iter(|| batch.stamped_header(black_box(stamp)))
        });
    }
    g.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
