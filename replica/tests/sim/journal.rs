//! A simulated node's Raft journal, on its simulated disk: entries in the
//! replica's own record format (`journal::record`: pointer records for the
//! sends whose batches lie in the partition log, plain records otherwise),
//! appended to one file, and the hard state in two checksummed slots, so a
//! torn write of one leaves the other.
//!
//! A later record for an index replaces that entry and every entry after
//! it (a replaced suffix is written after the old one, as the real journal
//! does); `prev_term` chains each record to the entry before it, and the
//! first record that does not decode or chain ends the journal.
//!
//! A journal made on an empty directory is marked new (a `new` file, durable
//! before the state file is made), as the replica's is, until its node has
//! caught up (`caught_up`): the node's fence (`corelog_replica::wiped`).

use bytes::Bytes;
use corelog::testing::segment::io::{SimStorage, Storage, StorageFile, WriteBufs};
use corelog_replica::journal::record::{self, Kind, Pointer};
use raft::eraftpb::{Entry, HardState};
use std::io;
use std::path::Path;

type File = <SimStorage as Storage>::File;

/// The new journal's marker.
const NEW_MARKER: &str = "new";

/// Bytes of one hard-state slot: seq, term, vote, commit, checksum.
const SLOT: usize = 40;

/// Where one entry's record lies.
#[derive(Debug, Clone, Copy)]
struct Slot {
    term: u64,
    pos: u64,
    pointer: Option<Pointer>,
}

/// What a journal held when it was opened.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Entries from index 1, each with its pointer when it is one (its data
    /// then empty until read back from the partition log).
    pub entries: Vec<(Entry, Option<Pointer>)>,
    pub hs: HardState,
    /// Bytes of a torn or stale tail cut at the open.
    pub cut: u64,
    /// The journal is marked new, with its incarnation: its node has not
    /// caught up since its directory was made (a new cluster, or a wiped
    /// disk).
    pub new: Option<u64>,
}

/// The journal of one node.
pub struct Journal {
    file: File,
    state: File,
    len: u64,
    /// `slots[i]` is entry `i + 1`.
    slots: Vec<Slot>,
    seq: u64,
    /// The hard state last recorded.
    hs: HardState,
    dir: std::path::PathBuf,
    disk: SimStorage,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, cutting a torn tail.
    /// A journal made here is marked new with `incarnation`.
    pub async fn open(
        disk: &SimStorage,
        dir: &Path,
        incarnation: u64,
    ) -> io::Result<(Journal, Recovered)> {
        disk.create_dir_all(dir)?;
        if !disk.list_dir(dir)?.iter().any(|n| n == "state") {
            let marker = disk.open(&dir.join(NEW_MARKER), true)?;
            let inc = Bytes::copy_from_slice(&incarnation.to_le_bytes());
            marker.write_all_at(0, WriteBufs::one(inc)).await?;
            marker.sync_data().await?;
            if let Some(parent) = dir.parent() {
                disk.sync_dir(parent).await?;
            }
            disk.sync_dir(dir).await?;
        }
        let file = disk.open(&dir.join("journal"), true)?;
        let state = disk.open(&dir.join("state"), true)?;
        if let Some(parent) = dir.parent() {
            disk.sync_dir(parent).await?;
        }
        disk.sync_dir(dir).await?;
        let len = file.len()?;
        let buf = Bytes::from(file.read_at(0, len as usize).await?);
        let new = match disk.list_dir(dir)?.iter().any(|n| n == NEW_MARKER) {
            false => None,
            true => {
                let m = disk.open(&dir.join(NEW_MARKER), false)?;
                let b = m.read_at(0, m.len()? as usize).await?;
                Some(
                    b.get(..8)
                        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default())),
                )
            }
        };
        let mut rec = Recovered {
            new,
            ..Recovered::default()
        };
        let mut slots: Vec<Slot> = Vec::new();
        let mut pos = 0usize;
        while pos < buf.len() {
            let Ok(d) = record::decode(&buf.slice(pos..)) else {
                break;
            };
            let i = d.entry.index;
            if i == 0 || i > slots.len() as u64 + 1 {
                break;
            }
            let prev = if i == 1 {
                0
            } else {
                slots[i as usize - 2].term
            };
            if d.prev_term != prev {
                break;
            }
            slots.truncate(i as usize - 1);
            rec.entries.truncate(i as usize - 1);
            slots.push(Slot {
                term: d.entry.term,
                pos: pos as u64,
                pointer: d.pointer,
            });
            rec.entries.push((d.entry, d.pointer));
            pos += d.len;
        }
        rec.cut = len - pos as u64;
        if rec.cut > 0 {
            file.truncate(pos as u64).await?;
            file.sync_data().await?;
        }
        let (seq, hs) = read_state(&state).await?;
        rec.hs = hs.clone();
        let journal = Journal {
            file,
            state,
            len: pos as u64,
            slots,
            seq,
            hs,
            dir: dir.to_path_buf(),
            disk: disk.clone(),
        };
        Ok((journal, rec))
    }

    /// Drops the new journal's marker, durably: its node has caught up.
    pub async fn caught_up(&self) -> io::Result<()> {
        match self.disk.remove_file(&self.dir.join(NEW_MARKER)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => self.disk.sync_dir(&self.dir).await,
        }
    }

    /// The last entry's index.
    pub fn last_index(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The pointer of entry `index`, if it is one.
    pub fn pointer(&self, index: u64) -> Option<Pointer> {
        let i = usize::try_from(index).ok()?.checked_sub(1)?;
        self.slots.get(i)?.pointer
    }

    /// Appends `ents` (contiguous, the first at most one past the last
    /// entry), each recorded as `kind` says; not synced.
    pub async fn append(
        &mut self,
        ents: &[Entry],
        kind: impl Fn(&Entry) -> Kind,
    ) -> io::Result<()> {
        let mut out = Vec::new();
        for e in ents {
            let i = e.index as usize;
            if i == 0 || i > self.slots.len() + 1 {
                return Err(io::Error::other(format!(
                    "entry {i} does not follow entry {}",
                    self.slots.len()
                )));
            }
            self.slots.truncate(i - 1);
            let prev = if i == 1 { 0 } else { self.slots[i - 2].term };
            let k = kind(e);
            let parts = record::encode_parts(e, prev, k);
            self.slots.push(Slot {
                term: e.term,
                pos: self.len + out.len() as u64,
                pointer: match k {
                    Kind::Pointer(p) => Some(p),
                    _ => None,
                },
            });
            for s in parts.slices() {
                out.extend_from_slice(s);
            }
        }
        let n = out.len() as u64;
        self.file
            .write_all_at(self.len, WriteBufs::one(Bytes::from(out)))
            .await?;
        self.len += n;
        Ok(())
    }

    /// Drops entry `index` and every one after it, durably.
    pub async fn cut_from(&mut self, index: u64) -> io::Result<()> {
        let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.slots.get(i))
        else {
            return Ok(());
        };
        let pos = slot.pos;
        self.slots.truncate(index as usize - 1);
        self.file.truncate(pos).await?;
        self.file.sync_data().await?;
        self.len = pos;
        Ok(())
    }

    /// Records the hard state: written (into the older slot, not synced)
    /// when the term or the vote changed, as the replica's journal does;
    /// the commit index alone is kept in memory (recovered from the log and
    /// the peers).
    pub async fn set_hard_state(&mut self, hs: &HardState) -> io::Result<()> {
        let through = hs.term != self.hs.term || hs.vote != self.hs.vote;
        self.hs = hs.clone();
        if !through {
            return Ok(());
        }
        self.seq += 1;
        let mut b = [0u8; SLOT];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&hs.term.to_le_bytes());
        b[16..24].copy_from_slice(&hs.vote.to_le_bytes());
        b[24..32].copy_from_slice(&hs.commit.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&b[..32]);
        b[32..40].copy_from_slice(&sum.to_le_bytes());
        let pos = (self.seq % 2) * SLOT as u64;
        self.state
            .write_all_at(pos, WriteBufs::one(Bytes::copy_from_slice(&b)))
            .await
    }

    /// Makes every write above durable.
    pub async fn sync(&self) -> io::Result<()> {
        self.file.sync_data().await?;
        self.state.sync_data().await
    }
}

/// The newer whole slot of the hard state (an empty one when neither is).
async fn read_state(state: &File) -> io::Result<(u64, HardState)> {
    let len = state.len()? as usize;
    let buf = state.read_at(0, len.min(2 * SLOT)).await?;
    let mut best = (0, HardState::default());
    for b in buf.chunks_exact(SLOT) {
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if xxhash_rust::xxh3::xxh3_64(&b[..32]) != u(32) || u(0) <= best.0 {
            continue;
        }
        let hs = HardState {
            term: u(8),
            vote: u(16),
            commit: u(24),
            ..HardState::default()
        };
        best = (u(0), hs);
    }
    Ok(best)
}
