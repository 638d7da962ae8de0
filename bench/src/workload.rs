//! The messages producers send: pre-built batches, outside the timed path.

use crate::args::SizeRange;
use bytes::BytesMut;
use corelog::{BatchBuilder, MessageSpec};

/// Builds `count` batches of `per_batch` messages with sizes in `sizes`,
/// random payloads (so checksums do real work) and ids tagged by `seed`.
pub fn build_batches(seed: u64, sizes: SizeRange, per_batch: usize, count: usize) -> Vec<BytesMut> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::with_capacity(count);
    let now = crate::clock::now_micros();
    for b in 0..count {
        let lens: Vec<usize> = (0..per_batch)
            .map(|_| rng.usize(sizes.min..=sizes.max))
            .collect();
        let total: usize = lens.iter().sum::<usize>() + per_batch * 48;
        let mut payload = vec![0u8; sizes.max.max(1)];
        rng.fill(&mut payload);
        let mut builder = BatchBuilder::with_capacity(total);
        for (i, len) in lens.iter().enumerate() {
            builder.push(MessageSpec {
                id: (u128::from(seed) << 64) | ((b as u128) << 32) | i as u128,
                timestamp: now,
                payload: &payload[..*len],
                user_headers: b"",
            });
        }
        match builder.build() {
            Ok(bytes) => out.push(BytesMut::from(&bytes[..])),
            Err(e) => {
                eprintln!("corelog-bench: cannot build a batch: {e}");
                std::process::exit(2);
            }
        }
    }
    out
}
