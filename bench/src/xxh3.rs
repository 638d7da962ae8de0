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

/// The same partitions' bytes verified without the engine: `corelog
/// poll`'s read-only reader (`read_batches`: each segment mapped afresh,
/// every batch through admission's checks, both checksums) over every
/// partition of `dir`, the partitions dealt to `threads` threads as the
/// consumers deal them (`p % threads`). Between raw XXH3 over heap memory
/// and the engine's verified polls: what reading the page cache through a
/// fresh mapping costs (its page faults, its placement), with no shard,
/// queue or wake-up. Returns bytes per second for all threads together.
pub fn read_only_rate(
    dir: &std::path::Path,
    partitions: u64,
    threads: usize,
    limits: &corelog::Limits,
) -> Result<f64, String> {
    use corelog::testing::segment::log::read_only::read_batches;
    use corelog::PollFrom;
    let threads = threads.max(1) as u64;
    let start = Instant::now();
    let bytes = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<u64, String> {
                    let mut bytes = 0;
                    for p in (0..partitions).filter(|p| p % threads == t) {
                        let pdir = dir.join("partitions").join(p.to_string());
                        let read =
                            read_batches(&pdir, p, limits, PollFrom::First, u64::MAX, true, |_| {
                                Ok(())
                            })
                            .map_err(|e| format!("read-only verify of partition {p}: {e}"))?;
                        bytes += read.bytes;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a read-only verifier panicked".to_string())?
            })
            .sum::<Result<u64, String>>()
    })?;
    Ok(bytes as f64 / start.elapsed().as_secs_f64())
}
