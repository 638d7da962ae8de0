//! A group's Raft log on disk: the journal.
//!
//! ```text
//! DIR/replica/group-<g>/state                  term, vote, membership, snapshot (state.rs)
//! DIR/replica/group-<g>/<first index:020>.log  records back to back (record.rs)
//! DIR/replica/group-<g>/new                    present while a journal created empty has
//!                                              not yet caught up (group/fence.rs)
//! ```
//!
//! Entries after the snapshot are held in memory too (the leader sends
//! them from there); the files are for restarts. A conflicting suffix is
//! cut with `ftruncate` (and later files removed) before the new entries
//! are written, and all of it is made durable by the same `fdatasync`
//! that makes the new entries durable; nothing is acknowledged before it.
//!
//! Recovery, as a table of cases (`recover.rs` carries it out):
//!
//! | found in the files                                | done                         |
//! |---------------------------------------------------|------------------------------|
//! | whole records, indexes consecutive, terms rising  | kept                         |
//! | a file wholly at or below the snapshot (the next  | not read; removed at the     |
//! |   file starts at or below snapshot + 1)           |   next compaction            |
//! | records at or below the snapshot                  | skipped (compacted)          |
//! | a torn or damaged record (length, checksum, type) | cut there, reported          |
//! | a batch record whose batch does not verify        | cut there, reported          |
//! | an index gap or a term going back                 | cut there, reported          |
//! | a record whose `prev_term` is not the term before | cut there, reported          |
//! |   it (written after a rewritten suffix that a     |                              |
//! |   power cut persisted only in part)               |                              |
//! |   (a cut suffix whose truncate a crash undid)     |                              |
//! | files after a cut                                 | removed, reported            |
//! | first kept entry beyond snapshot + 1              | refused: entries are missing |
//!
//! A cut only ever removes entries this node never acknowledged as
//! persisted (their fdatasync had not returned), so the group loses
//! nothing a majority holds.

pub mod record;
mod recover;
pub mod state;
pub mod storage;
pub mod sync_ticket;

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
pub use record::{Kind, Pointer};
use state::{sync_dir, GroupState, StateError};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The marker of a journal created empty that has not yet caught up.
const NEW_MARKER: &str = "new";

/// A journal file rolls over past this many bytes.
const FILE_BYTES: u64 = 64 << 20;

/// Why a journal cannot be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
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
    /// The state file.
    #[error(transparent)]
    State(#[from] StateError),
    /// Entries between the snapshot and the first record are missing.
    #[error("{dir}: entries {from}..{to} are missing (snapshot at {snapshot})", dir = dir.display())]
    Gap {
        /// the journal
        dir: PathBuf,
        /// first missing index
        from: u64,
        /// first present index
        to: u64,
        /// the snapshot's index
        snapshot: u64,
    },
    /// A snapshot older than the one held.
    #[error("snapshot at {offered} is older than the one held at {held}")]
    SnapshotOutOfDate {
        /// the snapshot's index
        offered: u64,
        /// the held snapshot's index
        held: u64,
    },
    /// Entries handed to `append` do not continue the log.
    #[error("append at {first} does not continue a log of {first_index}..={last_index}")]
    Discontinuous {
        /// the first appended index
        first: u64,
        /// the log's first index
        first_index: u64,
        /// the log's last index
        last_index: u64,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> JournalError {
    let path = path.to_owned();
    move |source| JournalError::Io { op, path, source }
}

/// Removes compacted journal files on a thread of their own: removing a
/// 64 MiB file frees its pages, which took 11-29 ms on tmpfs (measured on a
/// group's loop, where every send of the group waited for it). Nothing
/// depends on the removal being done or durable: a compacted file found at
/// open is read past (its records are at or below the snapshot) and removed
/// at the next compaction. Inline if no thread can be started.
fn remove_files(paths: Vec<PathBuf>) {
    if paths.is_empty() {
        return;
    }
    let remove = |paths: Vec<PathBuf>| {
        for p in paths {
            if let Err(e) = std::fs::remove_file(&p) {
                tracing::warn!("removing compacted journal file {}: {e}", p.display());
            }
        }
    };
    let (tx, rx) = std::sync::mpsc::channel::<Vec<PathBuf>>();
    let spawned = std::thread::Builder::new()
        .name("journal-remove".into())
        .spawn(move || {
            if let Ok(paths) = rx.recv() {
                remove(paths);
            }
        });
    match spawned {
        Ok(_) => {
            let _ = tx.send(paths);
        }
        Err(_) => remove(paths),
    }
}

/// What recovery cut from the files at open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Entries kept after the snapshot.
    pub entries: u64,
    /// Where the journal was cut, and why (`None`: nothing was cut).
    pub cut: Option<String>,
    /// Files removed after the cut.
    pub removed_files: usize,
}

/// One journal file.
#[derive(Debug)]
struct JFile {
    first_index: u64,
    path: PathBuf,
    len: u64,
}

/// A group's log: the state, the files, the entries after the snapshot.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    state: GroupState,
    entries: VecDeque<Entry>,
    /// Byte position of each entry in `entries`: (file number in `files`
    /// counted from `files_base`, offset).
    positions: VecDeque<(u64, u64)>,
    /// Where each entry of `entries` written as a pointer record has its
    /// batch (its partition's log); `None` for entries written whole.
    pointers: VecDeque<Option<Pointer>>,
    files: VecDeque<JFile>,
    files_base: u64,
    active: Option<File>,
    /// Set when a file was created or removed since the last sync.
    dir_dirty: bool,
    /// Bytes of the records of `entries`.
    retained: u64,
    unsynced: bool,
    /// The last index a completed sync made durable.
    synced_index: u64,
    /// Set when something was written since the last sync ticket was
    /// taken (`sync_ticket.rs`): a ticket syncs the file only then.
    unticketed: bool,
    /// Bumped whenever entries are cut or replaced (a conflicting suffix,
    /// a snapshot): a sync ticket taken before then vouches for nothing.
    cuts: u64,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`. A new journal starts with
    /// `initial` as its membership, written durably before anything else;
    /// an existing one keeps the membership it recorded. A new journal is
    /// marked new (durably, before its state file) until `caught_up`.
    pub fn open(dir: &Path, initial: &ConfState) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let state = match GroupState::read(dir)? {
            Some(s) => s,
            None => {
                let marker = dir.join(NEW_MARKER);
                File::create(&marker)
                    .and_then(|mut f| {
                        f.write_all(&incarnation().to_le_bytes())?;
                        f.sync_all()
                    })
                    .map_err(io_err("create", &marker))?;
                let s = GroupState {
                    conf: initial.clone(),
                    ..GroupState::default()
                };
                s.write(dir)?;
                s
            }
        };
        let mut j = Journal {
            dir: dir.to_owned(),
            state,
            entries: VecDeque::new(),
            positions: VecDeque::new(),
            pointers: VecDeque::new(),
            files: VecDeque::new(),
            files_base: 0,
            active: None,
            dir_dirty: false,
            retained: 0,
            unsynced: false,
            synced_index: 0,
            unticketed: false,
            cuts: 0,
        };
        let recovered = j.recover()?;
        // What recovery kept may be in the page cache only (a process
        // crash, not a power cut, left it): durable from here on.
        if let Some(f) = j.files.back() {
            File::open(&f.path)
                .and_then(|file| file.sync_data())
                .map_err(io_err("fsync", &f.path))?;
        }
        j.synced_index = j.last_index();
        Ok((j, recovered))
    }

    /// Whether this journal was created empty and has not caught up since
    /// (also across restarts in between).
    #[cfg(any(test, feature = "journal"))]
    pub fn is_new(&self) -> bool {
        self.dir.join(NEW_MARKER).exists()
    }

    /// While the journal is new, the number drawn when it was made (0 for
    /// a marker older corelog wrote empty): a wiped node's next journal
    /// draws another, so its peers tell it from the journal it lost.
    pub fn new_incarnation(&self) -> Result<Option<u64>, JournalError> {
        let marker = self.dir.join(NEW_MARKER);
        match std::fs::read(&marker) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read", &marker)(e)),
            Ok(b) => Ok(Some(b.get(..8).map_or(0, |b| {
                u64::from_le_bytes(b.try_into().unwrap_or_default())
            }))),
        }
    }

    /// Drops the new journal's marker: it has caught up.
    pub fn caught_up(&mut self) -> Result<(), JournalError> {
        let marker = self.dir.join(NEW_MARKER);
        match std::fs::remove_file(&marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err("remove", &marker)(e)),
            _ => sync_dir(&self.dir).map_err(io_err("fsync directory", &self.dir)),
        }
    }

    #[cfg(any(test, feature = "journal"))]
    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Term, vote, commit.
    pub fn hard_state(&self) -> &HardState {
        &self.state.hard
    }

    /// The membership.
    pub fn conf_state(&self) -> &ConfState {
        &self.state.conf
    }

    /// The snapshot's index.
    pub fn snapshot_index(&self) -> u64 {
        self.state.snapshot_index
    }

    /// The snapshot (metadata, membership, data).
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        s.data = self.state.snapshot_data.clone();
        let m = s.mut_metadata();
        m.index = self.state.snapshot_index;
        m.term = self.state.snapshot_term;
        m.set_conf_state(self.state.conf.clone());
        s
    }

    /// The first index held (snapshot + 1).
    pub fn first_index(&self) -> u64 {
        self.state.snapshot_index + 1
    }

    /// The last index held (the snapshot's when no entry follows it).
    pub fn last_index(&self) -> u64 {
        self.state.snapshot_index + self.entries.len() as u64
    }

    /// The entry at `index`, if held.
    pub fn entry(&self, index: u64) -> Option<&Entry> {
        let at = index.checked_sub(self.first_index())?;
        self.entries.get(usize::try_from(at).ok()?)
    }

    /// Where entry `index`'s batch lies, if it was written as a pointer
    /// record.
    pub fn pointer(&self, index: u64) -> Option<Pointer> {
        let at = index.checked_sub(self.first_index())?;
        *self.pointers.get(usize::try_from(at).ok()?)?
    }

    /// Gives pointer entry `index` its batch, read back from its
    /// partition's log (the caller checked that the pointer names it).
    pub fn fill(&mut self, index: u64, batch: Bytes) {
        let Some(at) = index
            .checked_sub(self.first_index())
            .and_then(|a| usize::try_from(a).ok())
        else {
            return;
        };
        if let Some(e) = self.entries.get_mut(at) {
            if e.data.is_empty() {
                self.retained += batch.len() as u64;
                e.data = batch;
            }
        }
    }

    /// Lets entry `index` of `term` hold `view` (the same batch, read back
    /// from its partition's segment once applied, so below the commit mark
    /// where nothing cuts it) instead of the bytes it arrived in, which go
    /// back to the allocator. Refused, keeping the entry as it is, unless
    /// the entry is still that term's and `view` has its length and its
    /// 256-byte batch header (which holds the checksum over the rest).
    pub fn hold_view(&mut self, index: u64, term: u64, view: Bytes) -> bool {
        let Some(at) = index
            .checked_sub(self.first_index())
            .and_then(|a| usize::try_from(a).ok())
        else {
            return false;
        };
        let Some(e) = self.entries.get_mut(at) else {
            return false;
        };
        let header = corelog::BATCH_HEADER_LEN;
        let same = e.term == term
            && e.data.len() == view.len()
            && e.data.len() >= header
            && e.data[..header] == view[..header];
        if same {
            e.data = view;
        }
        same
    }

    /// Cuts entries `index..` (at open: their batches are not where their
    /// pointers say, so this node never acknowledged them), durably.
    pub fn cut_from(&mut self, index: u64) -> Result<(), JournalError> {
        if index > self.last_index() || index < self.first_index() {
            return Ok(());
        }
        self.truncate_from(index)?;
        self.sync()
    }

    /// Entries `[low, high)` (the caller checked the bounds), at most
    /// `max_size` bytes but at least one.
    pub fn slice(&self, low: u64, high: u64, max_size: Option<u64>) -> Vec<Entry> {
        let first = self.first_index();
        let from = (low - first) as usize;
        let to = (high - first) as usize;
        let mut out = Vec::with_capacity(to - from);
        let mut size = 0u64;
        for e in self.entries.range(from..to) {
            size += record::len(e);
            if !out.is_empty() && max_size.is_some_and(|m| size > m) {
                break;
            }
            out.push(e.clone());
        }
        out
    }

    /// Bytes of the entries after the snapshot (as records).
    pub fn bytes(&self) -> u64 {
        self.retained
    }

    /// Records a new hard state: written through when the term or the vote
    /// changed (an election), otherwise kept (the commit index is
    /// recovered from the log and the peers).
    pub fn set_hard_state(&mut self, hs: &HardState) -> Result<(), JournalError> {
        let durable = hs.term != self.state.hard.term || hs.vote != self.state.hard.vote;
        self.state.hard = hs.clone();
        if durable {
            self.state.write(&self.dir)?;
        }
        Ok(())
    }

    #[cfg(any(test, feature = "journal"))]
    /// Appends `ents`, first cutting any held suffix from `ents[0].index`
    /// on (a conflict the leader resolved). Not durable until [`Journal::sync`].
    pub fn append(&mut self, ents: &[Entry]) -> Result<(), JournalError> {
        self.append_as(ents, |_| Kind::Plain)
    }

    /// [`append`](Journal::append), writing each entry as `kind` says
    /// (`record.rs`): a batch record for a stamped batch admission
    /// verified (its checksum then stops at the batch header, and the
    /// batch's own checksums cover the rest; an entry it wrongly names
    /// would be cut as damage at the next open), a pointer record for one
    /// its partition's log holds.
    pub fn append_as(
        &mut self,
        ents: &[Entry],
        kind: impl Fn(&Entry) -> Kind,
    ) -> Result<(), JournalError> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        if first.index < self.first_index() || first.index > self.last_index() + 1 {
            return Err(JournalError::Discontinuous {
                first: first.index,
                first_index: self.first_index(),
                last_index: self.last_index(),
            });
        }
        if first.index <= self.last_index() {
            self.truncate_from(first.index)?;
        }
        for e in ents {
            self.write_one(e, kind(e))?;
        }
        Ok(())
    }

    /// Cuts entries `index..` from memory and from the files.
    fn truncate_from(&mut self, index: u64) -> Result<(), JournalError> {
        let keep = (index - self.first_index()) as usize;
        let Some(&(file_no, at)) = self.positions.get(keep) else {
            return Ok(());
        };
        let cut: u64 = self.entries.range(keep..).map(record::len).sum();
        self.retained -= cut;
        self.synced_index = self.synced_index.min(index - 1);
        self.cuts += 1;
        self.entries.truncate(keep);
        self.positions.truncate(keep);
        self.pointers.truncate(keep);
        let n = (file_no - self.files_base) as usize;
        while self.files.len() > n + 1 {
            if let Some(f) = self.files.pop_back() {
                std::fs::remove_file(&f.path).map_err(io_err("remove", &f.path))?;
                self.dir_dirty = true;
            }
        }
        self.active = None;
        if let Some(f) = self.files.back_mut() {
            let file = OpenOptions::new()
                .write(true)
                .open(&f.path)
                .map_err(io_err("open", &f.path))?;
            file.set_len(at).map_err(io_err("truncate", &f.path))?;
            f.len = at;
            self.active = Some(file);
        }
        self.unsynced = true;
        self.unticketed = true;
        tracing::info!(
            "journal {}: cut the uncommitted suffix from entry {index} (the leader's log differs)",
            self.dir.display()
        );
        Ok(())
    }

    fn write_one(&mut self, e: &Entry, kind: Kind) -> Result<(), JournalError> {
        let roll = self.files.back().is_none_or(|f| f.len >= FILE_BYTES);
        if roll {
            let path = self.dir.join(format!("{:020}.log", e.index));
            let file = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&path)
                .map_err(io_err("create", &path))?;
            if let Some(old) = self.active.take() {
                // The file left behind must be durable before it is no
                // longer the one `sync` covers.
                let old_path = self.files.back().map_or(path.clone(), |f| f.path.clone());
                old.sync_data().map_err(io_err("fsync", &old_path))?;
            }
            self.files.push_back(JFile {
                first_index: e.index,
                path,
                len: 0,
            });
            self.active = Some(file);
            self.dir_dirty = true;
        }
        let file_no = self.files_base + self.files.len() as u64 - 1;
        let Some(f) = self.files.back_mut() else {
            return Ok(());
        };
        if self.active.is_none() {
            self.active = Some(
                OpenOptions::new()
                    .write(true)
                    .open(&f.path)
                    .map_err(io_err("open", &f.path))?,
            );
        }
        let Some(active) = self.active.as_ref() else {
            return Ok(());
        };
        let at = f.len;
        let prev_term = match self.entries.back() {
            Some(p) => p.term,
            None => self.state.snapshot_term,
        };
        let parts = record::encode_parts(e, prev_term, kind);
        write_all_at(active, at, &parts.slices()).map_err(io_err("write", &f.path))?;
        f.len += parts.disk_len();
        self.retained += record::len(e);
        self.positions.push_back((file_no, at));
        self.pointers.push_back(match kind {
            Kind::Pointer(p) => Some(p),
            _ => None,
        });
        self.entries.push_back(e.clone());
        self.unsynced = true;
        self.unticketed = true;
        Ok(())
    }

    /// Makes everything written so far durable (`fdatasync`, and the
    /// directory when files came or went).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.unsynced {
            if let (Some(active), Some(f)) = (self.active.as_ref(), self.files.back()) {
                active.sync_data().map_err(io_err("fsync", &f.path))?;
            }
            self.unsynced = false;
        }
        if self.dir_dirty {
            sync_dir(&self.dir).map_err(io_err("fsync directory", &self.dir))?;
            self.dir_dirty = false;
        }
        self.synced_index = self.last_index();
        Ok(())
    }

    /// The last index a completed sync made durable (under `fsync=batch`
    /// the last index after every step; under `interval` at most that
    /// far behind; under `never` where the last compaction left it).
    pub fn synced_index(&self) -> u64 {
        self.synced_index
    }

    /// Records a snapshot at `index` (its term `term`, state-machine data
    /// `data`) and drops what it covers: the state file first (durable),
    /// then whole files below it.
    pub fn compact(&mut self, index: u64, data: Bytes) -> Result<(), JournalError> {
        if index <= self.state.snapshot_index {
            return Ok(());
        }
        let Some(term) = self.entry(index).map(|e| e.term) else {
            return Ok(());
        };
        self.sync()?;
        let first_before = self.first_index();
        let mut next = self.state.clone();
        next.snapshot_index = index;
        next.snapshot_term = term;
        next.snapshot_data = data;
        next.hard.commit = next.hard.commit.max(index);
        next.write(&self.dir)?;
        self.state = next;
        let drop = usize::try_from(index + 1 - first_before)
            .unwrap_or(usize::MAX)
            .min(self.entries.len());
        let dropped: u64 = self.entries.range(..drop).map(record::len).sum();
        self.retained -= dropped;
        self.entries.drain(..drop);
        self.positions.drain(..drop);
        self.pointers.drain(..drop);
        // Whole files that hold only compacted entries go, off this thread.
        let mut gone = Vec::new();
        while self.files.len() > 1
            && self
                .files
                .get(1)
                .is_some_and(|f| f.first_index <= index + 1)
        {
            if let Some(f) = self.files.pop_front() {
                gone.push(f.path);
                self.files_base += 1;
            }
        }
        remove_files(gone);
        self.sync()
    }

    /// Replaces everything with a snapshot the leader sent: the state file
    /// first (durable), then every journal file is removed.
    pub fn apply_snapshot(&mut self, snap: &Snapshot) -> Result<(), JournalError> {
        let m = snap.get_metadata();
        if m.index < self.state.snapshot_index {
            return Err(JournalError::SnapshotOutOfDate {
                offered: m.index,
                held: self.state.snapshot_index,
            });
        }
        let mut next = self.state.clone();
        next.snapshot_index = m.index;
        next.snapshot_term = m.term;
        next.snapshot_data = snap.data.clone();
        next.conf = m.get_conf_state().clone();
        next.hard.commit = next.hard.commit.max(m.index);
        next.write(&self.dir)?;
        self.state = next;
        self.cuts += 1;
        self.entries.clear();
        self.positions.clear();
        self.pointers.clear();
        self.retained = 0;
        self.active = None;
        while let Some(f) = self.files.pop_front() {
            std::fs::remove_file(&f.path).map_err(io_err("remove", &f.path))?;
            self.files_base += 1;
        }
        self.unsynced = false;
        sync_dir(&self.dir).map_err(io_err("fsync directory", &self.dir))?;
        self.dir_dirty = false;
        self.synced_index = self.last_index();
        Ok(())
    }
}

/// Writes all of `parts` at `at`, in order.
fn write_all_at(f: &File, at: u64, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut pos = at;
    for p in parts {
        f.write_all_at(p, pos)?;
        pos += p.len() as u64;
    }
    Ok(())
}

/// A number unlikely to repeat, never 0: a new journal's incarnation.
fn incarnation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.finish() | 1
}
