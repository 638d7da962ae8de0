//! What a clone held before recovery touched it. A loss under a durable
//! policy is explained by the bytes the filesystem gave back, not by what
//! recovery made of them: for each lost batch, the segment file it belongs
//! in, where in it, and what those bytes were (past the file's end, zeros,
//! the batch itself, or something else).

use crate::stream::{message_count, producer_batch};
use std::path::{Path, PathBuf};

/// The newest segment files of one partition, read before recovery.
pub(crate) struct RawPartition {
    /// Every segment file's base offset and length, oldest first.
    listing: Vec<(u64, u64)>,
    /// The newest few: base offset, path, bytes.
    newest: Vec<(u64, PathBuf, Vec<u8>)>,
}

/// Reads partition `p`'s segment files under `dir` (the newest `keep` in
/// full); nothing is written.
pub(crate) fn read(dir: &Path, p: u64, keep: usize) -> RawPartition {
    let pdir = dir.join("partitions").join(p.to_string());
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&pdir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let base = name.strip_suffix(".log")?.parse().ok()?;
                    Some((base, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let listing = files
        .iter()
        .map(|(b, path)| (*b, std::fs::metadata(path).map_or(0, |m| m.len())))
        .collect();
    let newest = files
        .iter()
        .skip(files.len().saturating_sub(keep))
        .map(|(b, path)| (*b, path.clone(), std::fs::read(path).unwrap_or_default()))
        .collect();
    RawPartition { listing, newest }
}

/// Where batch `seq` of partition `p` belonged and what the raw files held
/// there.
pub(crate) fn describe(raw: &RawPartition, p: u64, seq: u64) -> String {
    // The offsets and lengths of the batches the writer sent, up to `seq`.
    let mut offset = 0u64;
    let mut batches = Vec::with_capacity(seq as usize + 1);
    for s in 0..=seq {
        let b = producer_batch(p, s);
        batches.push((offset, b.len() as u64));
        offset += message_count(&b);
    }
    let (at, len) = batches[seq as usize];
    let Some(&(base, _)) = raw.listing.iter().rev().find(|(b, _)| *b <= at) else {
        return format!("batch {seq} (offset {at}): no segment file starts at or below it");
    };
    let position: u64 = batches
        .iter()
        .filter(|(o, _)| *o >= base && *o < at)
        .map(|(_, l)| l)
        .sum();
    let Some((_, path, bytes)) = raw.newest.iter().find(|(b, _, _)| *b == base) else {
        return format!(
            "batch {seq} (offset {at}): belongs in segment {base}, not among the newest read"
        );
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    let (from, to) = (position as usize, (position + len) as usize);
    let what = match bytes.get(from..to) {
        None if from >= bytes.len() => "past the file's end".to_string(),
        None => format!("cut by the file's end at byte {}", bytes.len()),
        Some(b) if b.iter().all(|&x| x == 0) => "all zeros".to_string(),
        Some(b) => {
            // Stamping changes only the header's 256 bytes.
            let produced = producer_batch(p, seq);
            match b.iter().zip(&produced).skip(256).position(|(x, y)| x != y) {
                None => "the batch, frames intact".to_string(),
                Some(k) if b[k + 256..].iter().all(|&x| x == 0) => {
                    format!("the batch up to its byte {}, zeros after", k + 256)
                }
                Some(k) => format!("other bytes from byte {} of the batch", k + 256),
            }
        }
    };
    format!(
        "batch {seq} (offset {at}) belongs in {name} at bytes {from}..{to}; the file was {} bytes before recovery; there: {what}",
        bytes.len()
    )
}

/// The partition's segment files and their lengths, newest last.
pub(crate) fn listing(raw: &RawPartition) -> String {
    let tail = raw.listing.len().saturating_sub(4);
    let shown: Vec<String> = raw.listing[tail..]
        .iter()
        .map(|(b, l)| format!("{b}: {l} B"))
        .collect();
    format!(
        "{} segment files, the newest: {}",
        raw.listing.len(),
        shown.join(", ")
    )
}
