//! A group's durable Raft state beside its journal: `DIR/state`.
//!
//! ```text
//! 0   magic        8 B   "CLRPST02" (the version of the state and the journal's records)
//! 8   body_len     u64
//! 16  checksum     u64   XXH3-64 of the body
//! 24  body:
//!     term u64, vote u64, commit u64,
//!     snapshot_index u64, snapshot_term u64,
//!     voters: count u32, ids u64 each,
//!     learners: count u32, ids u64 each,
//!     snapshot_data: len u32, bytes
//! ```
//!
//! Replaced whole (temporary file, fsync, rename, directory fsync): a crash
//! leaves the old state or the new one. It is written when the term or the
//! vote changes, at a snapshot, and at the first start (the initial
//! membership, set once: a later start reads it and never sets it again).

use bytes::Bytes;
use raft::eraftpb::{ConfState, HardState};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version 02: the journal's records carry `prev_term` (record.rs).
const MAGIC: &[u8; 8] = b"CLRPST02";
/// A journal of version 01 (records without `prev_term`): not read.
const MAGIC_01: &[u8; 8] = b"CLRPST01";
const PREFIX_LEN: usize = 24;
pub(crate) const FILE_NAME: &str = "state";

/// What the state file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupState {
    /// Term, vote and (a lower bound of) the commit index.
    pub hard: HardState,
    /// The membership.
    pub conf: ConfState,
    /// The last entry the snapshot covers (0: none).
    pub snapshot_index: u64,
    /// Its term.
    pub snapshot_term: u64,
    /// The snapshot's state-machine data.
    pub snapshot_data: Bytes,
}

/// Why the state file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// An I/O call failed.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the file
        path: PathBuf,
        /// the error
        source: std::io::Error,
    },
    /// The file is not a whole state record.
    #[error("{path} is damaged: {damage}", path = path.display())]
    Damaged {
        /// the file
        path: PathBuf,
        /// what is wrong
        damage: StateDamage,
    },
}

/// What is wrong with a state file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateDamage {
    /// It ends before a field.
    #[error("body ends {0} bytes early")]
    Short(usize),
    /// Written in version 01, before records carried `prev_term`.
    #[error("written by an older corelog (journal version 01, records without prev_term): move this node's replica directory away; the node then rejoins as a wiped one and is rebuilt from the leader")]
    Version01,
    /// Not a state file.
    #[error("wrong magic")]
    Magic,
    /// The body is not the length the prefix gives.
    #[error("body is {body} bytes, prefix says {prefix}")]
    Length {
        /// the body's
        body: u64,
        /// the prefix's
        prefix: u64,
    },
    /// The body is not what was written.
    #[error("checksum {stored:#018x}, body hashes to {computed:#018x}")]
    Checksum {
        /// the prefix's
        stored: u64,
        /// the body's
        computed: u64,
    },
    /// More members than a group has.
    #[error("{0} members")]
    Members(usize),
    /// Bytes after the last field.
    #[error("{0} bytes after the snapshot data")]
    Trailing(usize),
}

impl GroupState {
    /// Reads `dir/state`; `None` when there is none (a new group).
    pub fn read(dir: &Path) -> Result<Option<GroupState>, StateError> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StateError::Io {
                    op: "read",
                    path,
                    source,
                })
            }
        };
        decode(&bytes)
            .map(Some)
            .map_err(|damage| StateError::Damaged { path, damage })
    }

    /// Replaces `dir/state` with this state, durably.
    pub fn write(&self, dir: &Path) -> Result<(), StateError> {
        let path = dir.join(FILE_NAME);
        let tmp = dir.join(format!("{FILE_NAME}.tmp"));
        let io = |op, path: &Path| {
            let path = path.to_owned();
            move |source| StateError::Io { op, path, source }
        };
        let mut f = std::fs::File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(&encode(self)).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io("rename", &path))?;
        sync_dir(dir).map_err(io("fsync directory", dir))
    }
}

/// fsyncs a directory (its entries: created, renamed, removed files).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn encode(s: &GroupState) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + s.snapshot_data.len());
    for v in [
        s.hard.term,
        s.hard.vote,
        s.hard.commit,
        s.snapshot_index,
        s.snapshot_term,
    ] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    for ids in [&s.conf.voters, &s.conf.learners] {
        body.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in ids {
            body.extend_from_slice(&id.to_le_bytes());
        }
    }
    body.extend_from_slice(&(s.snapshot_data.len() as u32).to_le_bytes());
    body.extend_from_slice(&s.snapshot_data);
    let mut out = Vec::with_capacity(PREFIX_LEN + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads little-endian fields off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], StateDamage> {
        if self.0.len() < n {
            return Err(StateDamage::Short(n - self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, StateDamage> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, StateDamage> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn ids(&mut self) -> Result<Vec<u64>, StateDamage> {
        let n = self.u32()? as usize;
        if n > 1024 {
            return Err(StateDamage::Members(n));
        }
        (0..n).map(|_| self.u64()).collect()
    }
}

fn decode(bytes: &[u8]) -> Result<GroupState, StateDamage> {
    let mut r = Reader(bytes);
    match r.take(8)? {
        m if m == MAGIC => {}
        m if m == MAGIC_01 => return Err(StateDamage::Version01),
        _ => return Err(StateDamage::Magic),
    }
    let len = r.u64()?;
    let stored = r.u64()?;
    let body = r.0;
    if body.len() as u64 != len {
        return Err(StateDamage::Length {
            body: body.len() as u64,
            prefix: len,
        });
    }
    let computed = xxhash_rust::xxh3::xxh3_64(body);
    if computed != stored {
        return Err(StateDamage::Checksum { stored, computed });
    }
    let mut r = Reader(body);
    let mut hard = HardState::default();
    hard.term = r.u64()?;
    hard.vote = r.u64()?;
    hard.commit = r.u64()?;
    let snapshot_index = r.u64()?;
    let snapshot_term = r.u64()?;
    let mut conf = ConfState::default();
    conf.voters = r.ids()?;
    conf.learners = r.ids()?;
    let n = r.u32()? as usize;
    let snapshot_data = Bytes::copy_from_slice(r.take(n)?);
    if !r.0.is_empty() {
        return Err(StateDamage::Trailing(r.0.len()));
    }
    Ok(GroupState {
        hard,
        conf,
        snapshot_index,
        snapshot_term,
        snapshot_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(GroupState::read(dir.path()).expect("read").is_none());
        let mut s = GroupState::default();
        s.hard.term = 5;
        s.hard.vote = 2;
        s.hard.commit = 9;
        s.conf.voters = vec![1, 2, 3];
        s.snapshot_index = 4;
        s.snapshot_term = 2;
        s.snapshot_data = Bytes::from_static(b"offsets");
        s.write(dir.path()).expect("write");
        assert_eq!(GroupState::read(dir.path()).expect("read"), Some(s));
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).expect("read");
        let at = bytes.len() - 2;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(matches!(
            GroupState::read(dir.path()),
            Err(StateError::Damaged { .. })
        ));
        // An older version's state (and journal) is refused, saying what
        // to do.
        bytes[at] ^= 1;
        bytes[..8].copy_from_slice(MAGIC_01);
        std::fs::write(&path, &bytes).expect("write");
        let e = GroupState::read(dir.path()).expect_err("version 01");
        assert!(e.to_string().contains("older corelog"), "{e}");
    }

    /// A body behind a valid prefix (its length and checksum right).
    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(body).to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn a_state_file_that_cannot_be_read_is_an_error_never_a_new_group() {
        // A new group would start at term 0 with no vote: a node that
        // forgot its vote could vote twice in a term.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        std::fs::create_dir(&path).expect("a directory where the file is");
        match GroupState::read(dir.path()) {
            Err(StateError::Io { op, path: p, .. }) => assert_eq!((op, p), ("read", path)),
            other => panic!("expected the read to fail: {other:?}"),
        }
    }

    #[test]
    fn each_damage_is_named() {
        let mut wrong = framed(&[0u8; 60]);
        wrong[..8].copy_from_slice(b"CLRPST03");
        assert_eq!(decode(&wrong), Err(StateDamage::Magic));
        // Term and vote, then 4 of the commit index's 8 bytes.
        assert_eq!(decode(&framed(&[0u8; 20])), Err(StateDamage::Short(4)));
        let members = |voters: u32| {
            let mut body = vec![0u8; 40];
            body.extend_from_slice(&voters.to_le_bytes());
            body.extend((0..u64::from(voters)).flat_map(u64::to_le_bytes));
            body.extend_from_slice(&[0u8; 8]); // no learners, no data
            decode(&framed(&body))
        };
        assert_eq!(members(1024).map(|s| s.conf.voters.len()), Ok(1024));
        assert_eq!(members(1025), Err(StateDamage::Members(1025)));
        // Every field, no members, no data: 52 bytes; one more trails.
        assert!(decode(&framed(&[0u8; 52])).is_ok());
        assert_eq!(decode(&framed(&[0u8; 53])), Err(StateDamage::Trailing(1)));
    }
}
