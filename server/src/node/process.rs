//! This process as the kernel sees it (`/proc/self`): resident memory,
//! threads, bytes read from and written to storage; and the host's memory
//! and a directory's file system space. For GET_STATS (the fields Iggy
//! fills from the same sources) and the load test.

/// A `Name:   value` field of `/proc/self/status` (kB fields in kB).
fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Resident memory, bytes.
pub fn resident_bytes() -> u64 {
    status_field("VmRSS").unwrap_or(0) * 1024
}

#[cfg(test)]
/// Peak resident memory, bytes.
pub fn peak_resident_bytes() -> u64 {
    status_field("VmHWM").unwrap_or(0) * 1024
}

/// Threads.
pub fn threads() -> u64 {
    status_field("Threads").unwrap_or(0)
}

/// Bytes this process made the kernel read from and write to storage
/// (`read_bytes`, `write_bytes` of `/proc/self/io`).
pub fn storage_io() -> (u64, u64) {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        io.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(": ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    (field("read_bytes"), field("write_bytes"))
}

/// The host's memory and the part of it available, bytes
/// (`MemTotal`, `MemAvailable` of `/proc/meminfo`).
pub fn host_memory() -> (u64, u64) {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| {
                let kb: u64 = l
                    .strip_prefix(name)?
                    .strip_prefix(':')?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()?;
                kb.checked_mul(1024)
            })
            .unwrap_or(0)
    };
    (field("MemTotal"), field("MemAvailable"))
}

/// The free (to this user) and total bytes of the file system holding
/// `dir`; zeros when it cannot be asked.
pub fn disk_space(dir: &std::path::Path) -> (u64, u64) {
    let free = fs4::available_space(dir).unwrap_or(0);
    let total = fs4::total_space(dir).unwrap_or(0);
    (free, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let _held: Vec<std::thread::JoinHandle<()>> = (0..3)
            .map(|_| {
                std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)))
            })
            .collect();
        assert!(threads() >= 4);
        // The peak is read after the resident size: it can only have grown.
        let resident = resident_bytes();
        assert!(resident > 1 << 20);
        assert!(peak_resident_bytes() >= resident);
        let (total, available) = host_memory();
        assert!(total >= resident && available <= total);
        let (free, total) = disk_space(std::path::Path::new("/"));
        assert!(total > 0 && free <= total, "{free} of {total}");
    }
}
