//! `corelog tier status`: the local segments, the store's, and what waits
//! to be copied, per partition. Reads only: the directory's files are
//! listed, never opened for writing; the store is only listed and read.

use crate::args::TierStatusArgs;
use crate::error::{CliError, Exit};
use corelog::tier::manifest::{log_key, RemoteSegment};
use corelog::tier::upload::load_manifest;
use corelog::tier::{ObjectStore, S3Location, S3Store};
use corelog::{Limits, PollReply};
use std::path::{Path, PathBuf};

/// The store `--tier` names, answering.
fn open_store(tier: &str, endpoint: Option<&str>) -> Result<S3Store, CliError> {
    let location = S3Location::parse(tier, endpoint).map_err(CliError::Tier)?;
    let store = S3Store::from_env(location).map_err(CliError::Tier)?;
    store.check().map_err(|e| CliError::Tier(e.to_string()))?;
    Ok(store)
}

/// `corelog verify --tier`: for each of `partitions`, every segment the
/// store's manifest names, checked whole, and the store's log meeting the
/// local one (no offsets in neither). Prints what it checked and each
/// problem; returns how many.
pub(crate) fn verify_store(
    dir: &Path,
    tier: &str,
    endpoint: Option<&str>,
    partitions: &[u64],
) -> Result<usize, CliError> {
    let store = open_store(tier, endpoint)?;
    let root = dir.join("partitions");
    let mut bad = 0;
    for &p in partitions {
        let m = load_manifest(&store, p).map_err(|e| CliError::Tier(e.to_string()))?;
        let Some(end) = m.segments.last().map(|s| s.next_offset) else {
            println!(
                "partition {p}: the store ({}) holds nothing",
                store.describe()
            );
            continue;
        };
        println!(
            "partition {p}: the store ({}) holds {} segments, offsets {}..{end}",
            store.describe(),
            m.segments.len(),
            m.start_offset().unwrap_or(0),
        );
        for s in &m.segments {
            if let Err(why) = verify_remote(&store, p, s) {
                bad += 1;
                println!("  BAD {}: {why}", store.object_name(&log_key(p, s)));
            }
        }
        let local_first = local_segments(&root.join(p.to_string()))?
            .first()
            .map(|(b, _)| *b);
        if let Some(first) = local_first.filter(|f| *f > end) {
            bad += 1;
            println!("  BAD offsets {end}..{first} are neither in the store nor on local disk");
        }
    }
    Ok(bad)
}

pub(crate) fn status(a: TierStatusArgs) -> Result<Exit, CliError> {
    let store = open_store(&a.tier, a.tier_endpoint.as_deref())?;
    let root = a.dir.join("partitions");
    let partitions = match a.partition {
        Some(p) => vec![p],
        None => list_partitions(&root)?,
    };
    println!("store: {}", store.describe());
    let mut damaged = false;
    for p in partitions {
        let local = local_segments(&root.join(p.to_string()))?;
        let m = load_manifest(&store, p).map_err(|e| CliError::Tier(e.to_string()))?;
        let local_bytes: u64 = local.iter().map(|(_, len)| len).sum();
        // Every local segment but the newest (the active one) is sealed or
        // about to be; those past the manifest's end wait for a copy.
        let waiting: Vec<&(u64, u64)> = local
            .iter()
            .take(local.len().saturating_sub(1))
            .filter(|(base, _)| *base >= m.end_offset())
            .collect();
        println!(
            "partition {p}: local {} segments ({local_bytes} B) from offset {}; store {} segments ({} B) {}, manifest generation {}; backlog {} segments ({} B)",
            local.len(),
            local.first().map(|(b, _)| b.to_string()).unwrap_or_else(|| "-".into()),
            m.segments.len(),
            m.bytes(),
            match (m.start_offset(), m.segments.last()) {
                (Some(s), Some(l)) => format!("offsets {s}..{}", l.next_offset),
                _ => "empty".into(),
            },
            m.generation,
            waiting.len(),
            waiting.iter().map(|(_, len)| len).sum::<u64>(),
        );
        if a.verify {
            for s in &m.segments {
                if let Err(why) = verify_remote(&store, p, s) {
                    damaged = true;
                    println!("  DAMAGED {}: {why}", store.object_name(&log_key(p, s)));
                }
            }
        }
    }
    Ok(if damaged { Exit::Damage } else { Exit::Success })
}

/// Downloads a remote segment and checks it whole.
fn verify_remote(store: &S3Store, p: u64, s: &RemoteSegment) -> Result<(), String> {
    let key = log_key(p, s);
    let bytes = store.get(&key, None).map_err(|e| e.to_string())?;
    if bytes.len() as u64 != s.bytes {
        return Err(format!(
            "{} bytes, the manifest says {}",
            bytes.len(),
            s.bytes
        ));
    }
    let sum = corelog_segment::checksum::xxh3(&bytes);
    if sum != s.checksum {
        return Err(format!(
            "XXH3 {sum:#018x}, the manifest says {:#018x}",
            s.checksum
        ));
    }
    let r = PollReply::from_fetched(
        bytes.into(),
        PathBuf::from(store.object_name(&key)),
        0,
        &Limits::default(),
    )
    .map_err(|e| e.to_string())?;
    if let Some(b) = r.batches().find(|b| b.partition_id() != p) {
        return Err(format!(
            "the batch at offset {} belongs to partition {}, not {p}",
            b.base_offset(),
            b.partition_id()
        ));
    }
    if r.first_offset() != s.base_offset || r.next_offset() != s.next_offset {
        return Err(format!(
            "holds offsets {}..{}, the manifest says {}..{}",
            r.first_offset(),
            r.next_offset(),
            s.base_offset,
            s.next_offset
        ));
    }
    Ok(())
}

fn list_partitions(root: &Path) -> Result<Vec<u64>, CliError> {
    let mut ids: Vec<u64> = std::fs::read_dir(root)
        .map_err(|e| CliError::io("list", root, e))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// `(base offset, bytes)` of each segment file, oldest first.
fn local_segments(dir: &Path) -> Result<Vec<(u64, u64)>, CliError> {
    let mut segs = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| CliError::io("list", dir, e))? {
        let e = e.map_err(|e| CliError::io("list", dir, e))?;
        let Some(base) = e
            .file_name()
            .to_str()
            .and_then(corelog_segment::log::parse_log_name)
        else {
            continue;
        };
        let len = e
            .metadata()
            .map_err(|e| CliError::io("stat", e_path(dir, base), e))?
            .len();
        segs.push((base, len));
    }
    segs.sort_unstable();
    Ok(segs)
}

fn e_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(corelog_segment::log::log_name(base))
}
