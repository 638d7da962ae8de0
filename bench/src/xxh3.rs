//! The verification baseline: raw XXH3 of this build over memory.

use std::time::Instant;

/// Raw XXH3 throughput of this build on `threads` cores at once, for
/// `secs`, each thread hashing its own 256 MiB buffer: from memory, like the
/// page-cache bytes a poll verifies, and sharing the memory bandwidth the
/// way concurrent consumers do (an in-cache buffer on one idle core hashes
/// about three times faster on these machines). Returns bytes per second
/// for all threads together.
pub fn rate(threads: usize, secs: f64) -> f64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|t| {
                s.spawn(move || {
                    let buf: Vec<u8> = (0..256usize << 20).map(|i| (i * 131 + t) as u8).collect();
                    let start = Instant::now();
                    let mut n = 0u64;
                    let mut acc = 0u64;
                    while start.elapsed().as_secs_f64() < secs {
                        acc ^= xxhash_rust::xxh3::xxh3_64(std::hint::black_box(&buf));
                        n += 1;
                    }
                    std::hint::black_box(acc);
                    (n * buf.len() as u64) as f64 / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}
