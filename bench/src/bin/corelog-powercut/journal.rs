//! The acknowledgement journal: one text line per event, written with one
//! `write` each to a file outside the filesystem under test, so that the
//! journal's length before a clone says which acknowledgements preceded it.
//!
//! ```text
//! ack <partition> <seq> <base_offset> <digest:hex> <ack time, ns since the epoch>
//! sent <partition> <batches submitted>
//! ```

use std::collections::BTreeMap;
use std::path::Path;

/// One acknowledged batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ack {
    pub(crate) seq: u64,
    pub(crate) base_offset: u64,
    pub(crate) digest: u64,
    pub(crate) at_ns: u64,
    /// Whether its line ends below the clone's mark.
    pub(crate) before_clone: bool,
}

/// What the journal says of one partition.
#[derive(Debug, Default)]
pub(crate) struct PartitionJournal {
    /// By sequence number.
    pub(crate) acks: BTreeMap<u64, Ack>,
    /// Batches the writer submitted, once it finished.
    pub(crate) sent: Option<u64>,
}

pub(crate) fn ack_line(p: u64, seq: u64, base_offset: u64, digest: u64, at_ns: u64) -> String {
    format!("ack {p} {seq} {base_offset} {digest:016x} {at_ns}\n")
}

pub(crate) fn sent_line(p: u64, sent: u64) -> String {
    format!("sent {p} {sent}\n")
}

/// Reads the journal; lines ending at or below `upto` bytes preceded the
/// clone.
pub(crate) fn read(path: &Path, upto: u64) -> Result<BTreeMap<u64, PartitionJournal>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading the journal {}: {e}", path.display()))?;
    let mut out: BTreeMap<u64, PartitionJournal> = BTreeMap::new();
    let mut end = 0u64;
    for line in text.split_inclusive('\n') {
        end += line.len() as u64;
        let Some(line) = line.strip_suffix('\n') else {
            return Err(format!("the journal ends in a partial line {line:?}"));
        };
        let bad = || format!("journal line {line:?} is malformed");
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).ok_or_else(bad);
        match f.first().copied() {
            Some("ack") if f.len() == 6 => {
                let ack = Ack {
                    seq: num(2)?,
                    base_offset: num(3)?,
                    digest: u64::from_str_radix(f[4], 16).map_err(|_| bad())?,
                    at_ns: num(5)?,
                    before_clone: end <= upto,
                };
                let pj = out.entry(num(1)?).or_default();
                if pj.acks.insert(ack.seq, ack).is_some() {
                    return Err(format!("{}: acknowledged twice", bad()));
                }
            }
            Some("sent") if f.len() == 3 => out.entry(num(1)?).or_default().sent = Some(num(2)?),
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// Nanoseconds since the epoch (comparable with `date +%s%N`).
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
