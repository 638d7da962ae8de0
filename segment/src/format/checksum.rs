//! XXH3-64, the one checksum of the format, and the batch checksum's gather.

use super::layout::CHECKSUMMED_HEADER_LEN;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// XXH3-64 (seed 0) of `bytes`.
#[inline]
pub fn xxh3(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// The SIMD path xxhash-rust was compiled with in this build.
///
/// xxhash-rust selects its accumulator at compile time from the enabled
/// target features. The workspace's `.cargo/config.toml` builds for
/// `x86-64-v3`, which selects AVX2 (about twice the SSE2 throughput).
pub const fn simd_path() -> &'static str {
    if cfg!(target_feature = "avx512f") {
        "avx512"
    } else if cfg!(target_feature = "avx2") {
        "avx2"
    } else if cfg!(target_feature = "sse2") {
        "sse2"
    } else if cfg!(target_feature = "neon") {
        "neon"
    } else {
        "scalar"
    }
}

/// Whether the CPU running this process can execute the checksum code this
/// build was compiled for (an AVX2 build dies on SIGILL on an older CPU).
pub fn cpu_supports_build() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        not(target_feature = "avx512f")
    ))]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        any(target_feature = "avx2", target_feature = "avx512f")
    )))]
    {
        true
    }
}

/// Where admission puts each frame's checksum on its way to `batch_checksum`.
pub(crate) trait Gather {
    fn push(&mut self, frame_checksum: u64);
    fn finish(&mut self) -> u64;
}

impl<G: Gather> Gather for &mut G {
    #[inline(always)]
    fn push(&mut self, frame_checksum: u64) {
        G::push(self, frame_checksum)
    }

    fn finish(&mut self) -> u64 {
        G::finish(self)
    }
}

/// The batch checksum's whole input, kept: the 44 checksummed header bytes
/// then each frame's 8 checksum bytes, contiguous. An admitted batch keeps
/// it so that stamping rehashes N × 8 contiguous bytes instead of walking
/// the frames again.
#[derive(Clone)]
pub(crate) struct SumInput(Vec<u8>);

impl SumInput {
    pub(crate) fn new(header: &[u8; CHECKSUMMED_HEADER_LEN], frames: usize) -> Self {
        let mut v = Vec::with_capacity(CHECKSUMMED_HEADER_LEN + frames.saturating_mul(8));
        v.extend_from_slice(header);
        SumInput(v)
    }

    /// `batch_checksum` with the checksummed header bytes replaced.
    pub(crate) fn with_header(&mut self, header: &[u8; CHECKSUMMED_HEADER_LEN]) -> u64 {
        self.0[..CHECKSUMMED_HEADER_LEN].copy_from_slice(header);
        xxh3_64(&self.0)
    }
}

impl Gather for SumInput {
    #[inline(always)]
    fn push(&mut self, frame_checksum: u64) {
        self.0.extend_from_slice(&frame_checksum.to_le_bytes());
    }

    fn finish(&mut self) -> u64 {
        xxh3_64(&self.0)
    }
}

impl Gather for BatchChecksum {
    #[inline(always)]
    fn push(&mut self, frame_checksum: u64) {
        BatchChecksum::push(self, frame_checksum)
    }

    fn finish(&mut self) -> u64 {
        match &mut self.stream {
            None => xxh3_64(&self.buf[..self.len]),
            Some(s) => {
                s.update(&self.buf[..self.len]);
                s.digest()
            }
        }
    }
}

/// Computes `batch_checksum`: XXH3-64 over the 44 checksummed header bytes
/// followed by each frame's 8 checksum bytes, without materialising the
/// whole input (the frame checksums are strided through the blob).
pub(crate) struct BatchChecksum {
    buf: [u8; Self::CHUNK],
    len: usize,
    stream: Option<Box<Xxh3>>,
}

impl BatchChecksum {
    const CHUNK: usize = 2048;

    pub(crate) fn new(header: &[u8; CHECKSUMMED_HEADER_LEN]) -> Self {
        let mut buf = [0u8; Self::CHUNK];
        buf[..CHECKSUMMED_HEADER_LEN].copy_from_slice(header);
        BatchChecksum {
            buf,
            len: CHECKSUMMED_HEADER_LEN,
            stream: None,
        }
    }

    #[inline(always)]
    pub(crate) fn push(&mut self, frame_checksum: u64) {
        if self.len + 8 > Self::CHUNK {
            self.stream
                .get_or_insert_with(|| Box::new(Xxh3::new()))
                .update(&self.buf[..self.len]);
            self.len = 0;
        }
        self.buf[self.len..self.len + 8].copy_from_slice(&frame_checksum.to_le_bytes());
        self.len += 8;
    }

    /// Everything that fitted in one chunk is hashed in one shot.
    pub(crate) fn finish(mut self) -> u64 {
        Gather::finish(&mut self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_equals_one_shot_across_chunk_boundaries() {
        let header = [7u8; CHECKSUMMED_HEADER_LEN];
        for n in [0usize, 1, 250, 251, 252, 500, 1000, 5000] {
            let mut flat = header.to_vec();
            let mut g = BatchChecksum::new(&header);
            for i in 0..n {
                let c = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                flat.extend_from_slice(&c.to_le_bytes());
                g.push(c);
            }
            assert_eq!(g.finish(), xxh3(&flat), "n = {n}");
        }
    }
}
