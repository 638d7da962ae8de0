//! How much segment preallocation a data directory gets, decided once at
//! open from the filesystem it is on.
//!
//! | the directory is on                 | preallocation                      |
//! |-------------------------------------|------------------------------------|
//! | tmpfs (memory)                      | off                                |
//! | anything, with `fsync=never`        | off                                |
//! | anything else                       | on, each shard's budget at most a  |
//! |                                     | share of a sixteenth of free space |
//!
//! On tmpfs a `fallocate` saves no metadata update (there are no blocks to
//! map): it allocates and zeroes the step's memory pages at once, holding
//! the file's inode lock meanwhile, so every write to that segment waits
//! behind it. Measured with a 3-node cluster on /dev/shm (8 producers of
//! 1 MB batches): the engine's append p90 went from 35-50 ms with 64 MiB
//! steps to 5 ms without them.
//!
//! On a disk, preallocation pays where appends are synced: the blocks are
//! mapped before the fdatasync. Without syncs, ext4's delayed allocation
//! maps them at write-back, off the append path, whereas a `fallocate`
//! maps them under the inode lock, reading cold block bitmaps from the
//! disk, while the writes to that segment wait behind it: 100-350 ms
//! stalls (in alternating runs at half of peak, an append p99 of 0.7-10 ms
//! with it, 0.15-0.65 ms without; docs/bench/profiles.md).

use corelog_segment::log::{FsyncPolicy, LogConfig};
use std::path::Path;

/// The share of free space the preallocation of all shards together may
/// hold: a sixteenth.
const SHARE_OF_FREE: u64 = 16;

/// `statfs`'s magic number for tmpfs (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Fits `log`'s preallocation to the filesystem `dir` is on (see the table
/// above), and says what it changed.
pub(crate) fn fit(log: &mut LogConfig, dir: &Path, shards: usize) {
    if log.preallocate && on_tmpfs(dir) {
        log.preallocate = false;
        tracing::info!(
            "{} is on tmpfs: segment preallocation off (it would only hold memory early and stall writes)",
            dir.display()
        );
        return;
    }
    if log.preallocate && log.fsync == FsyncPolicy::Never {
        log.preallocate = false;
        tracing::info!(
            "fsync never: segment preallocation off (delayed allocation maps blocks at write-back)"
        );
        return;
    }
    let free = fs4::available_space(dir).unwrap_or(u64::MAX);
    let asked = log.preallocation.budget;
    log.preallocation.budget = budget(asked, free, shards);
    if log.preallocation.budget < asked {
        tracing::info!(
            "preallocation budget {} bytes a shard (asked {asked}): {free} bytes free",
            log.preallocation.budget
        );
    }
}

/// Whether `dir` is on tmpfs (false when that cannot be told).
// `f_type`'s width differs between architectures; here it is already i64.
#[allow(clippy::useless_conversion)]
pub(crate) fn on_tmpfs(dir: &Path) -> bool {
    rustix::fs::statfs(dir).is_ok_and(|s| i64::from(s.f_type) == TMPFS_MAGIC)
}

/// Each shard's preallocation budget: the configured one, but never more
/// than its share of a sixteenth of the free space, so that preallocation
/// cannot be what fills a disk.
pub(crate) fn budget(configured: u64, free: u64, shards: usize) -> u64 {
    configured.min(free / SHARE_OF_FREE / shards.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::{budget, fit, on_tmpfs};
    use corelog_segment::log::{FsyncPolicy, LogConfig};

    #[test]
    fn the_budget_is_a_small_share_of_free_space() {
        const GIB: u64 = 1 << 30;
        // Plenty free: the configured budget.
        assert_eq!(budget(GIB, 80 * GIB, 2), GIB);
        // 8 GiB free, 2 shards: a sixteenth, halved.
        assert_eq!(budget(GIB, 8 * GIB, 2), GIB / 4);
        // A full disk: nothing ahead.
        assert_eq!(budget(GIB, 0, 4), 0);
        assert_eq!(budget(GIB, 16 * GIB, 0), GIB);
    }

    #[test]
    fn tmpfs_gets_no_preallocation_and_a_disk_keeps_it() {
        let shm = std::path::Path::new("/dev/shm");
        let disk = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        if !on_tmpfs(shm) || on_tmpfs(&disk) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs /dev/shm on tmpfs and {} on a disk",
                disk.display()
            );
            return;
        }
        let synced = || LogConfig {
            fsync: FsyncPolicy::Batch,
            ..LogConfig::default()
        };
        let mut log = synced();
        fit(&mut log, shm, 2);
        assert!(!log.preallocate, "tmpfs: off");
        let mut log = synced();
        fit(&mut log, &disk, 2);
        assert!(log.preallocate, "a disk: on");
    }

    #[test]
    fn without_syncs_nothing_is_preallocated() {
        let disk = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        for (fsync, on) in [
            (FsyncPolicy::Never, false),
            (FsyncPolicy::Batch, !on_tmpfs(&disk)),
        ] {
            let mut log = LogConfig {
                fsync,
                ..LogConfig::default()
            };
            fit(&mut log, &disk, 2);
            assert_eq!(log.preallocate, on, "fsync {fsync}");
        }
    }
}
