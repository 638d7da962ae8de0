//! The partition log: one partition's segments, appended through io_uring,
//! served from mmap, recovered on open.
//!
//! ```text
//! DIR/                                  (the partition's directory)
//!   00000000000000000000.log            stamped batches back to back
//!   00000000000000000000.index          sparse index, seal record once sealed
//!   00000000000000052311.log            next segment, named by its first offset
//!   00000000000000052311.index
//!   consumers/<consumer id>.offset      stored consumer offsets
//! ```
//!
//! # Append path
//!
//! [`PartitionLog::append`] runs synchronously up to the write: it stamps the
//! batch (`base_offset` = next offset, `base_timestamp` never going back),
//! reserves its byte range in the active segment and spawns the write (a
//! vectored write of the stamped header and the untouched frames) on the
//! shard's ring. Several writes may be in flight; a FIFO of them advances
//! the *written mark* only over writes that completed, in order. Under
//! [`FsyncPolicy::Batch`] a single sync task runs `fdatasync` over every
//! file with completed writes and advances the *durable mark* to the
//! written mark it saw when it started: one sync acknowledges every batch it
//! covers (group commit). Acknowledgements and the readers' visible end
//! follow the durable mark under `Batch`, the written mark otherwise.
//!
//! # Rotation
//!
//! When the active segment has reached `segment_bytes`, the next append
//! creates the next segment (named by the next offset), preallocates it in
//! the background, and the old one is sealed once its writes drain: an
//! `fdatasync`, a sync of the directory (so the next segment's name is
//! durable too), then its index rewritten with a seal record. Only then is
//! the segment *confirmed*: recovery trusts confirmed segments and recovers
//! the rest (see [`recovery`]).
//!
//! # Mapping
//!
//! Each segment is mapped once, at its full capacity (`segment_bytes` plus
//! the largest batch), when it is created or opened. The mapping never
//! moves, grows or shrinks; readers only read below the visible end, which
//! only covers completed writes, so no read touches a page past the end of
//! the file (no SIGBUS) and no write touches bytes a reader holds. A deleted
//! segment's mapping lives as long as the last poll reply holding it.
//!
//! # Failures
//!
//! A failed write or sync poisons the log: every later append fails with
//! [`LogError::Poisoned`] until the log is reopened, which recovers it from
//! what is on disk. Nothing is acknowledged past the failure.

mod config;
mod error;
mod event;
pub mod index;
pub mod inspect;
mod offsets;
mod poll;
pub mod recovery;
pub mod scan;
mod segment;

pub use config::{FsyncPolicy, LogConfig, OpenCheck, ParseFsyncError, Retention};
pub use error::{Damage, LogError, Poison};
pub use poll::{PollFrom, PollReply};
pub use recovery::{RecoveryReport, TailCut};
pub use segment::{index_name, log_name, parse_log_name};

use crate::io::{Storage, StorageFile, WriteBufs};
use crate::format::{Batch, Stamp};
use bytes::Bytes;
use segment::{SegState, Segment, Visible};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What an append stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendAck {
    /// Offset of the batch's first message.
    pub base_offset: u64,
    /// Messages in the batch.
    pub message_count: u32,
    /// Base offset of the segment file holding it.
    pub segment: u64,
    /// Byte position of the batch in that file.
    pub position: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// The stamped `base_timestamp`.
    pub base_timestamp: u64,
}

/// A partition's size and offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStats {
    /// The partition id.
    pub partition: u64,
    /// Offset of the first retained message.
    pub first_offset: u64,
    /// Offset after the last visible message (the next offset to be read).
    pub next_offset: u64,
    /// Segment files.
    pub segments: usize,
    /// Bytes of stored batches (visible or in flight).
    pub bytes: u64,
    /// Appends acknowledged or in flight since open.
    pub appends: u64,
    /// `fdatasync` calls issued for data files since open.
    pub syncs: u64,
    /// Whether a failed write or sync poisoned the log.
    pub poisoned: bool,
}

/// One partition's log. Cheap to clone; all clones are the same log, and it
/// lives on one thread (a shard).
pub struct PartitionLog<S: Storage> {
    inner: Rc<Inner<S>>,
}

impl<S: Storage> Clone for PartitionLog<S> {
    fn clone(&self) -> Self {
        PartitionLog {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Storage> std::fmt::Debug for PartitionLog<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLog")
            .field("partition", &self.inner.partition)
            .field("dir", &self.inner.dir)
            .finish()
    }
}

struct Inner<S: Storage> {
    partition: u64,
    dir: PathBuf,
    config: LogConfig,
    storage: S,
    /// Set when the log is closed: cuts short a seal's wait for write-back.
    closing: Rc<event::Event>,
    st: RefCell<State<S::File>>,
}

/// A point in the log: after the batch ending at `end` in segment `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    segment: u64,
    end: u64,
    next_offset: u64,
    last_batch: Option<u64>,
    last_timestamp: u64,
}

struct Inflight {
    seq: u64,
    mark: Mark,
    done: bool,
}

struct State<F> {
    segments: VecDeque<Segment<F>>,
    next_offset: u64,
    last_timestamp: u64,
    next_seq: u64,
    inflight: VecDeque<Inflight>,
    written: Mark,
    durable: Mark,
    /// Appends waiting for the acknowledgement mark, by end offset.
    acks: BTreeMap<u64, Waker>,
    /// Flushes waiting for the written mark.
    flushes: Vec<(u64, Waker)>,
    poison: Option<Arc<Poison>>,
    /// The acknowledgement mark when the log was poisoned.
    poison_mark: u64,
    syncing: bool,
    /// A sync round ([`PartitionLog::sync_once`]) is running. Rounds never
    /// overlap: a round clears the dirty flags of the files it syncs before
    /// its syncs complete, so another round running meanwhile would take
    /// those files for durable and acknowledge writes no sync covered yet.
    round_running: bool,
    /// Rounds waiting for the running one to end.
    round_waiters: Vec<Waker>,
    /// A segment file was created since the last directory sync.
    names_dirty: bool,
    closed: bool,
    appends: u64,
    syncs: u64,
    offsets: offsets::Offsets,
}

impl<F> State<F> {
    fn segment_mut(&mut self, base: u64) -> Option<&mut Segment<F>> {
        let i = self
            .segments
            .partition_point(|s| s.base_offset <= base)
            .checked_sub(1)?;
        self.segments.get_mut(i).filter(|s| s.base_offset == base)
    }

    fn active(&self) -> Option<&Segment<F>> {
        self.segments.back()
    }
}

/// A batch to append: fresh from a producer, or stamped by a leader.
enum Incoming {
    Fresh(Batch),
    Stamped(Batch),
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl<S: Storage> PartitionLog<S> {
    /// Opens (creating if needed) the log of `partition` in `dir` (the
    /// partition's own directory) and recovers it: see [`recovery`].
    pub async fn open(
        storage: S,
        dir: impl Into<PathBuf>,
        partition: u64,
        config: LogConfig,
    ) -> Result<(PartitionLog<S>, RecoveryReport), LogError> {
        recovery::open(storage, dir.into(), partition, config).await
    }

    /// The partition id.
    pub fn partition(&self) -> u64 {
        self.inner.partition
    }

    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.inner.config
    }

    /// Stamps a validated producer batch and appends it. The stamp and the
    /// position are taken when this is called (appends are ordered by call),
    /// the write is in flight when it returns, and the future resolves when
    /// the fsync policy allows the acknowledgement. Dropping the future does
    /// not cancel the write.
    pub fn append(&self, batch: Batch) -> AppendFuture<S> {
        self.start_append(Incoming::Fresh(batch))
    }

    /// Appends a batch a leader already stamped, verbatim: its
    /// `partition_id` must be this partition, its `base_offset` the next
    /// offset, its `base_timestamp` not older than the last.
    pub fn append_stamped(&self, batch: Batch) -> AppendFuture<S> {
        self.start_append(Incoming::Stamped(batch))
    }

    fn start_append(&self, incoming: Incoming) -> AppendFuture<S> {
        let state = match self.reserve(incoming) {
            Ok((ack, end)) => AppendState::Waiting { ack, end },
            Err(e) => AppendState::Failed(Some(e)),
        };
        AppendFuture {
            log: self.clone(),
            state,
        }
    }

    fn reserve(&self, incoming: Incoming) -> Result<(AppendAck, u64), LogError> {
        let inner = &self.inner;
        let mut st = inner.st.borrow_mut();
        if let Some(cause) = &st.poison {
            return Err(LogError::Poisoned {
                partition: inner.partition,
                cause: cause.clone(),
            });
        }
        if st.closed {
            return Err(LogError::Closed {
                partition: inner.partition,
            });
        }
        let (bufs, batch_ts, count) = match incoming {
            Incoming::Fresh(mut batch) => {
                let ts = now_us().max(st.last_timestamp);
                let header = batch.stamped_header(Stamp {
                    partition_id: inner.partition,
                    base_offset: st.next_offset,
                    base_timestamp: ts,
                });
                let count = batch.as_ref().message_count();
                let body = batch.into_bytes().slice(crate::format::layout::BATCH_HEADER_LEN..);
                let bufs = WriteBufs {
                    head: Bytes::copy_from_slice(&header.0),
                    body,
                };
                (bufs, ts, count)
            }
            Incoming::Stamped(batch) => {
                let view = batch.as_ref();
                if view.partition_id() != inner.partition {
                    return Err(LogError::PartitionMismatch {
                        expected: inner.partition,
                        found: view.partition_id(),
                    });
                }
                if view.base_offset() != st.next_offset {
                    return Err(LogError::OffsetMismatch {
                        expected: st.next_offset,
                        found: view.base_offset(),
                    });
                }
                if view.base_timestamp() < st.last_timestamp {
                    return Err(LogError::TimestampBackwards {
                        last: st.last_timestamp,
                        found: view.base_timestamp(),
                    });
                }
                let (ts, count) = (view.base_timestamp(), view.message_count());
                (WriteBufs::one(batch.into_bytes()), ts, count)
            }
        };
        let len = bufs.len() as u64;
        let max = inner.config.limits.max_batch_bytes;
        if len > max {
            // Segments are mapped at segment_bytes + max_batch_bytes: a
            // larger batch could be neither served nor recovered.
            return Err(LogError::Batch(crate::format::BatchError::TooLarge {
                declared: len,
                max,
            }));
        }
        let needs_rotation = st
            .active()
            .map(|a| a.len >= inner.config.segment_bytes)
            .unwrap_or(true);
        if needs_rotation {
            self.rotate(&mut st)?;
        }
        let next_offset = st.next_offset + u64::from(count);
        let interval = inner.config.index_interval_bytes;
        let base_offset = st.next_offset;
        let Some(seg) = st.segments.back_mut() else {
            return Err(LogError::Closed {
                partition: inner.partition,
            });
        };
        let pos = seg.len;
        let due = seg
            .last_indexed
            .map(|p| pos - p >= interval)
            .unwrap_or(true);
        if due {
            seg.index.push(index::IndexEntry {
                rel_offset: (base_offset - seg.base_offset) as u32,
                position: pos as u32,
                timestamp: batch_ts,
            });
            seg.last_indexed = Some(pos);
        }
        seg.len += len;
        seg.next_offset = next_offset;
        seg.last_batch = Some(pos);
        seg.last_timestamp = batch_ts;
        seg.first_timestamp.get_or_insert(batch_ts);
        seg.pending_writes += 1;
        let segment = seg.base_offset;
        let file = seg.writer.clone();
        let ack = AppendAck {
            base_offset: st.next_offset,
            message_count: count,
            segment,
            position: pos,
            bytes: len,
            base_timestamp: batch_ts,
        };
        st.next_offset = next_offset;
        st.last_timestamp = batch_ts;
        st.appends += 1;
        let seq = st.next_seq;
        st.next_seq += 1;
        st.inflight.push_back(Inflight {
            seq,
            mark: Mark {
                segment,
                end: pos + len,
                next_offset,
                last_batch: Some(pos),
                last_timestamp: batch_ts,
            },
            done: false,
        });
        drop(st);
        let Some(file) = file else {
            // An active segment always has its writer.
            self.write_done(
                seq,
                Err(std::io::Error::other("active segment has no open file")),
            );
            return Ok((ack, next_offset));
        };
        let log = self.clone();
        monoio::spawn(async move {
            let result = if log.inner.st.borrow().poison.is_some() {
                Err(std::io::Error::other(
                    "partition poisoned before the write was issued",
                ))
            } else {
                file.write_all_at(pos, bufs).await
            };
            log.write_done(seq, result);
        });
        Ok((ack, next_offset))
    }

    /// Creates the next segment and starts sealing the current one.
    fn rotate(&self, st: &mut State<S::File>) -> Result<(), LogError> {
        let inner = &self.inner;
        let base = st.next_offset;
        let path = inner.dir.join(log_name(base));
        let file = inner
            .storage
            .open(&path, true)
            .map_err(|e| LogError::io("create segment", &path, e))?;
        let capacity = usize::try_from(inner.config.segment_capacity()).unwrap_or(usize::MAX);
        let map = file
            .map(capacity)
            .map_err(|e| LogError::io("map segment", &path, e))?;
        let allocated = inner
            .config
            .preallocate
            .then(|| preallocate(&file, inner.config.segment_bytes, &path));
        if let Some(old) = st.segments.back_mut() {
            old.state = SegState::Sealing;
            if old.pending_writes == 0 {
                old.drained.set();
            }
            let log = self.clone();
            let old_base = old.base_offset;
            monoio::spawn(async move { log.seal(old_base).await });
        }
        let mut seg = Segment::new(&inner.dir, base, map, Some(file));
        seg.allocated = allocated;
        seg.visible.last_timestamp = st.last_timestamp;
        seg.last_timestamp = st.last_timestamp;
        st.segments.push_back(seg);
        st.names_dirty = true;
        Ok(())
    }

    fn write_done(&self, seq: u64, result: std::io::Result<()>) {
        let inner = &self.inner;
        let mut st = inner.st.borrow_mut();
        let Some(front) = st.inflight.front() else {
            return;
        };
        let Some(i) = seq.checked_sub(front.seq).map(|i| i as usize) else {
            return;
        };
        let Some(entry) = st.inflight.get_mut(i) else {
            return;
        };
        entry.done = true;
        let segment = entry.mark.segment;
        if let Some(seg) = st.segment_mut(segment) {
            seg.pending_writes -= 1;
            seg.dirty = true;
            if seg.pending_writes == 0 && seg.state != SegState::Active {
                seg.drained.set();
            }
        }
        if let Err(error) = result {
            let path = st
                .segment_mut(segment)
                .map(|s| s.log_path.clone())
                .unwrap_or_default();
            self.poison(&mut st, "write", path, error);
            return;
        }
        if st.poison.is_some() {
            return;
        }
        let mut advanced = None;
        while st.inflight.front().map(|f| f.done).unwrap_or(false) {
            if let Some(f) = st.inflight.pop_front() {
                advanced = Some(f.mark);
            }
        }
        let Some(mark) = advanced else { return };
        st.written = mark;
        let flushes = std::mem::take(&mut st.flushes);
        let (ready, waiting): (Vec<_>, Vec<_>) = flushes
            .into_iter()
            .partition(|(end, _)| *end <= mark.next_offset);
        st.flushes = waiting;
        let mut wake: Vec<Waker> = ready.into_iter().map(|(_, w)| w).collect();
        if inner.config.fsync.acks_durable() {
            if !st.syncing {
                st.syncing = true;
                let log = self.clone();
                monoio::spawn(async move { log.sync_loop().await });
            }
        } else {
            set_visible(&mut st, mark);
            wake.extend(take_acks(&mut st, mark.next_offset));
        }
        drop(st);
        for w in wake {
            w.wake();
        }
    }

    fn poison(
        &self,
        st: &mut State<S::File>,
        op: &'static str,
        path: PathBuf,
        error: std::io::Error,
    ) {
        if st.poison.is_none() {
            tracing::error!(
                "partition {} poisoned: {op} of {}: {error}",
                self.inner.partition,
                path.display()
            );
            st.poison_mark = self.ack_mark(st).next_offset;
            st.poison = Some(Arc::new(Poison { op, path, error }));
            // Tells the next open in this boot not to trust the page cache
            // (see recovery). Creating the file is enough; if even that
            // fails, the disk is in a state the next open will report.
            let marker = self.inner.dir.join(POISON_MARKER);
            if let Err(e) = self.inner.storage.open(&marker, true) {
                tracing::error!("cannot create {}: {e}", marker.display());
            }
        }
        let wake: Vec<Waker> = std::mem::take(&mut st.acks)
            .into_values()
            .chain(std::mem::take(&mut st.flushes).into_iter().map(|(_, w)| w))
            .collect();
        for seg in st.segments.iter() {
            seg.drained.set();
        }
        for w in wake {
            w.wake();
        }
    }

    fn ack_mark(&self, st: &State<S::File>) -> Mark {
        if self.inner.config.fsync.acks_durable() {
            st.durable
        } else {
            st.written
        }
    }

    /// Group commit: while writes completed past the durable mark, sync
    /// every file they touched, then advance the durable mark.
    async fn sync_loop(self) {
        while let Ok(true) = self.sync_once().await {}
        self.inner.st.borrow_mut().syncing = false;
    }

    /// One round of syncing; false when there was nothing to sync.
    async fn sync_once(&self) -> Result<bool, LogError> {
        RoundWait { log: self }.await;
        let _turn = RoundTurn { log: self };
        let inner = &self.inner;
        let (target, files, dir) = {
            let mut st = inner.st.borrow_mut();
            if let Some(cause) = &st.poison {
                return Err(LogError::Poisoned {
                    partition: inner.partition,
                    cause: cause.clone(),
                });
            }
            let target = st.written;
            if target.next_offset <= st.durable.next_offset
                && !st.names_dirty
                && !st.segments.iter().any(|s| s.dirty)
            {
                return Ok(false);
            }
            let files: Vec<(S::File, PathBuf)> = st
                .segments
                .iter_mut()
                .filter(|s| s.dirty)
                .filter_map(|s| {
                    s.dirty = false;
                    s.writer.clone().map(|w| (w, s.log_path.clone()))
                })
                .collect();
            let dir = std::mem::take(&mut st.names_dirty);
            st.syncs += files.len() as u64;
            (target, files, dir)
        };
        if dir {
            if let Err(e) = inner.storage.sync_dir(&inner.dir).await {
                let mut st = inner.st.borrow_mut();
                self.poison(&mut st, "directory sync", inner.dir.clone(), e);
                return Err(self.poisoned_error(&st));
            }
        }
        for (file, path) in files {
            if let Err(e) = file.sync_data().await {
                let mut st = inner.st.borrow_mut();
                self.poison(&mut st, "fdatasync", path, e);
                return Err(self.poisoned_error(&st));
            }
        }
        let mut st = inner.st.borrow_mut();
        if st.poison.is_some() {
            return Err(self.poisoned_error(&st));
        }
        if target.next_offset >= st.durable.next_offset {
            st.durable = target;
        }
        mark_index_durable(&mut st, target);
        let mut wake = Vec::new();
        if inner.config.fsync.acks_durable() {
            set_visible(&mut st, target);
            wake = take_acks(&mut st, target.next_offset);
        }
        let flush_index: Vec<u64> = st
            .segments
            .iter()
            .filter(|s| {
                s.state == SegState::Active
                    && s.index_durable >= s.index_written + INDEX_FLUSH_ENTRIES
                    && !s.index_flushing
            })
            .map(|s| s.base_offset)
            .collect();
        drop(st);
        for w in wake {
            w.wake();
        }
        for base in flush_index {
            let log = self.clone();
            monoio::spawn(async move { log.flush_index(base).await });
        }
        Ok(true)
    }

    fn poisoned_error(&self, st: &State<S::File>) -> LogError {
        match &st.poison {
            Some(cause) => LogError::Poisoned {
                partition: self.inner.partition,
                cause: cause.clone(),
            },
            None => LogError::Closed {
                partition: self.inner.partition,
            },
        }
    }

    /// Writes the durable index entries of an active segment not yet in its
    /// index file.
    async fn flush_index(&self, base: u64) {
        let (file, from, bytes, path) = {
            let mut st = self.inner.st.borrow_mut();
            let storage = self.inner.storage.clone();
            let Some(seg) = st.segment_mut(base) else {
                return;
            };
            if seg.index_flushing
                || seg.state != SegState::Active
                || seg.index_durable <= seg.index_written
            {
                return;
            }
            if seg.index_file.is_none() {
                match storage.open(&seg.index_path, true) {
                    Ok(f) => seg.index_file = Some(f),
                    Err(e) => {
                        tracing::warn!("opening {}: {e}", seg.index_path.display());
                        return;
                    }
                }
            }
            seg.index_flushing = true;
            let from = seg.index_written;
            let bytes = index::encode_all(&seg.index[from..seg.index_durable]);
            (seg.index_file.clone(), from, bytes, seg.index_path.clone())
        };
        let n = bytes.len() / index::ENTRY_LEN;
        let result = match file {
            Some(f) => {
                f.write_all_at(
                    (from * index::ENTRY_LEN) as u64,
                    WriteBufs::one(Bytes::from(bytes)),
                )
                .await
            }
            None => Ok(()),
        };
        let mut st = self.inner.st.borrow_mut();
        if let Some(seg) = st.segment_mut(base) {
            seg.index_flushing = false;
            match result {
                Ok(()) => seg.index_written = seg.index_written.max(from + n),
                Err(e) => tracing::warn!("writing {}: {e}", path.display()),
            }
        }
    }

    /// Seals a segment: waits for its writes, makes it durable, then writes
    /// its whole index with the seal record.
    async fn seal(&self, base: u64) {
        let inner = &self.inner;
        loop {
            let drained = {
                let st = inner.st.borrow();
                if st.poison.is_some() {
                    return;
                }
                let Some(seg) = st.segments.iter().find(|s| s.base_offset == base) else {
                    return;
                };
                if seg.pending_writes == 0 {
                    break;
                }
                seg.drained.clone()
            };
            drained.wait().await;
        }
        if inner.config.fsync == FsyncPolicy::Never {
            // Nothing waits for durability under `never`: let the kernel's
            // write-back make the segment durable first, so the fdatasync
            // that confirms it finds little left to write. Syncing a whole
            // dirty segment at once held ext4's journal long enough to stall
            // the appends to the next segment for hundreds of milliseconds.
            let sleep = monoio::time::sleep(NEVER_CONFIRM_DELAY);
            let closing = inner.closing.wait();
            monoio::select! {
                _ = sleep => {},
                _ = closing => {},
            }
        }
        let (file, path) = {
            let mut st = inner.st.borrow_mut();
            let Some(seg) = st.segment_mut(base) else {
                return;
            };
            // The segment stays dirty: a group-commit round must still sync
            // it (or wait for a round that does) before it acknowledges the
            // segment's last writes, which this fdatasync covers only once
            // it completes.
            (seg.writer.clone(), seg.log_path.clone())
        };
        if let Some(file) = &file {
            inner.st.borrow_mut().syncs += 1;
            if let Err(e) = file.sync_data().await {
                let mut st = inner.st.borrow_mut();
                self.poison(&mut st, "fdatasync (sealing)", path, e);
                return;
            }
        }
        // The seal record tells recovery that this segment is whole and that
        // the next segment's name is durable (it was created before sealing
        // began); recovery takes a gap after a confirmed segment for damage.
        if let Err(e) = inner.storage.sync_dir(&inner.dir).await {
            let mut st = inner.st.borrow_mut();
            self.poison(&mut st, "directory sync (sealing)", inner.dir.clone(), e);
            return;
        }
        let (bytes, index_path) = {
            let mut st = inner.st.borrow_mut();
            let Some(seg) = st.segment_mut(base) else {
                return;
            };
            let seal = index::Seal {
                data_len: seg.len,
                next_offset: seg.next_offset,
            };
            seg.index_durable = seg.index.len();
            (
                index::encode_sealed(&seg.index, seal),
                seg.index_path.clone(),
            )
        };
        if let Err(e) = write_whole(&inner.storage, &index_path, bytes).await {
            // The segment stays unconfirmed; recovery will verify it.
            tracing::warn!("sealing index {}: {e}", index_path.display());
        }
        let mut st = inner.st.borrow_mut();
        if let Some(seg) = st.segment_mut(base) {
            seg.state = SegState::Sealed;
            seg.index_written = seg.index.len();
            seg.writer = None;
            seg.index_file = None;
        }
    }

    /// Waits until every append issued so far is written, then syncs every
    /// file with unsynced writes (and the directory, if a segment was
    /// created). Under any policy, everything appended before the call is
    /// durable when it returns.
    pub async fn flush(&self) -> Result<(), LogError> {
        let target = self.inner.st.borrow().next_offset;
        FlushWait {
            log: self.clone(),
            target,
        }
        .await?;
        self.sync_once().await?;
        // sync_once may have found the batch policy's sync loop had already
        // covered everything; either way the durable mark is now at target.
        let st = self.inner.st.borrow();
        if let Some(cause) = &st.poison {
            return Err(LogError::Poisoned {
                partition: self.inner.partition,
                cause: cause.clone(),
            });
        }
        Ok(())
    }

    /// Stops taking appends, flushes, seals nothing more, writes the active
    /// segment's index and trims its preallocated tail so a reopen finds
    /// its exact end.
    pub async fn close(&self) -> Result<(), LogError> {
        self.inner.st.borrow_mut().closed = true;
        self.inner.closing.set();
        self.flush().await?;
        // Let segments being sealed finish.
        loop {
            let pending = {
                let st = self.inner.st.borrow();
                st.segments
                    .iter()
                    .find(|s| s.state == SegState::Sealing)
                    .map(|s| s.drained.clone())
            };
            match pending {
                Some(ev) if !ev.is_set() => ev.wait().await,
                Some(_) => monoio::time::sleep(std::time::Duration::from_millis(1)).await,
                None => break,
            }
            if self.inner.st.borrow().poison.is_some() {
                break;
            }
        }
        let allocating = self
            .inner
            .st
            .borrow()
            .segments
            .back()
            .and_then(|s| s.allocated.clone());
        if let Some(done) = allocating {
            done.wait().await;
        }
        let active = {
            let mut st = self.inner.st.borrow_mut();
            st.segments.back_mut().map(|seg| {
                seg.index_durable = seg.index.len();
                (
                    seg.writer.clone(),
                    seg.len,
                    seg.index_path.clone(),
                    index::encode_all(&seg.index),
                )
            })
        };
        if let Some((Some(file), len, index_path, bytes)) = active {
            if file.len().map(|l| l > len).unwrap_or(false) {
                file.truncate(len)
                    .await
                    .map_err(|e| LogError::io("trim segment", &self.inner.dir, e))?;
            }
            if let Err(e) = write_whole(&self.inner.storage, &index_path, bytes).await {
                tracing::warn!("writing {}: {e}", index_path.display());
            }
        }
        Ok(())
    }

    /// Deletes sealed segments past the retention limits (never the active
    /// one), oldest first, syncing the directory after each removal so a
    /// power cut can only leave a prefix deleted (no gap). Polls already
    /// holding a deleted segment keep reading it. Returns the deleted
    /// segment files.
    pub async fn enforce_retention(&self, now_us: u64) -> Result<Vec<PathBuf>, LogError> {
        let retention = self.inner.config.retention;
        let mut deleted = Vec::new();
        loop {
            let (log_path, index_path) = {
                let mut st = self.inner.st.borrow_mut();
                if st.segments.len() < 2 {
                    break;
                }
                let total: u64 = st.segments.iter().map(|s| s.len).sum();
                let Some(seg) = st.segments.front() else {
                    break;
                };
                if seg.state != SegState::Sealed {
                    break;
                }
                let expired = retention
                    .max_age
                    .map(|age| seg.last_timestamp.saturating_add(age.as_micros() as u64) < now_us)
                    .unwrap_or(false);
                let oversize = retention.max_bytes.map(|max| total > max).unwrap_or(false);
                if !expired && !oversize {
                    break;
                }
                let paths = (seg.log_path.clone(), seg.index_path.clone());
                self.inner
                    .storage
                    .remove_file(&paths.0)
                    .map_err(|e| LogError::io("retention: remove", &paths.0, e))?;
                st.segments.pop_front();
                paths
            };
            // A missing index is fine (recovery removes orphans too).
            let _ = self.inner.storage.remove_file(&index_path);
            self.inner
                .storage
                .sync_dir(&self.inner.dir)
                .await
                .map_err(|e| LogError::io("retention: directory sync", &self.inner.dir, e))?;
            deleted.push(log_path);
        }
        Ok(deleted)
    }

    /// Sizes and offsets.
    pub fn stats(&self) -> LogStats {
        let st = self.inner.st.borrow();
        LogStats {
            partition: self.inner.partition,
            first_offset: st.segments.front().map(|s| s.base_offset).unwrap_or(0),
            next_offset: self.visible_next_offset(&st),
            segments: st.segments.len(),
            bytes: st.segments.iter().map(|s| s.len).sum(),
            appends: st.appends,
            syncs: st.syncs,
            poisoned: st.poison.is_some(),
        }
    }

    fn visible_next_offset(&self, st: &State<S::File>) -> u64 {
        st.segments
            .iter()
            .rev()
            .find(|s| s.visible.len > 0)
            .map(|s| s.visible.next_offset)
            .unwrap_or_else(|| st.segments.front().map(|s| s.base_offset).unwrap_or(0))
    }

    /// The offset the next append will get.
    pub fn next_offset(&self) -> u64 {
        self.inner.st.borrow().next_offset
    }

    /// Whether a failed write or sync poisoned the log.
    pub fn is_poisoned(&self) -> bool {
        self.inner.st.borrow().poison.is_some()
    }

    /// The segment files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.inner
            .st
            .borrow()
            .segments
            .iter()
            .map(|s| s.log_path.clone())
            .collect()
    }
}

/// Starts preallocating `file` to `len` bytes on the ring; the event is set
/// when it finished (failures only cost the metadata updates it saves).
pub(crate) fn preallocate<F: StorageFile>(file: &F, len: u64, path: &Path) -> Rc<event::Event> {
    let done = Rc::new(event::Event::default());
    let (f, d, p) = (file.clone(), done.clone(), path.to_path_buf());
    monoio::spawn(async move {
        if let Err(e) = f.allocate(len).await {
            tracing::warn!("preallocating {}: {e}", p.display());
        }
        d.set();
    });
    done
}

/// How long a segment sealed under `FsyncPolicy::Never` waits for the
/// kernel's write-back (`vm.dirty_expire_centisecs`, 30 s by default) before
/// the fdatasync and seal record that confirm it. Until then it is recovered
/// like the active segment after a crash.
const NEVER_CONFIRM_DELAY: std::time::Duration = std::time::Duration::from_secs(30);

/// The file a poisoned log leaves in its directory for the next open.
pub const POISON_MARKER: &str = "POISONED";

/// Index entries written to the file at a time for an active segment.
const INDEX_FLUSH_ENTRIES: usize = 256;

/// Makes `mark` the visible end: its segment up to it, older ones whole.
fn set_visible<F>(st: &mut State<F>, mark: Mark) {
    for seg in st.segments.iter_mut().rev() {
        if seg.base_offset > mark.segment {
            continue;
        }
        if seg.base_offset == mark.segment {
            seg.visible = Visible {
                len: mark.end,
                next_offset: mark.next_offset,
                last_batch: mark.last_batch,
                last_timestamp: mark.last_timestamp,
            };
            continue;
        }
        if seg.visible.len == seg.len {
            break;
        }
        seg.visible = seg.fully_visible();
    }
}

/// After a sync that covered `mark`: index entries below it are durable.
fn mark_index_durable<F>(st: &mut State<F>, mark: Mark) {
    for seg in st.segments.iter_mut().rev() {
        if seg.base_offset > mark.segment {
            continue;
        }
        let limit = if seg.base_offset == mark.segment {
            mark.end
        } else {
            seg.len
        };
        let n = seg.index.partition_point(|e| u64::from(e.position) < limit);
        if n <= seg.index_durable && seg.base_offset < mark.segment {
            break;
        }
        seg.index_durable = seg.index_durable.max(n);
    }
}

fn take_acks<F>(st: &mut State<F>, upto: u64) -> Vec<Waker> {
    let later = st.acks.split_off(&(upto.saturating_add(1)));
    std::mem::replace(&mut st.acks, later)
        .into_values()
        .collect()
}

/// Writes a whole small file (an index) and trims it to its length.
async fn write_whole<S: Storage>(storage: &S, path: &Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let file = storage.open(path, true)?;
    let len = bytes.len() as u64;
    file.write_all_at(0, WriteBufs::one(Bytes::from(bytes)))
        .await?;
    if file.len()? > len {
        file.truncate(len).await?;
    }
    Ok(())
}

enum AppendState {
    Waiting { ack: AppendAck, end: u64 },
    Failed(Option<LogError>),
}

/// Resolves when an append is acknowledged (see [`PartitionLog::append`]).
pub struct AppendFuture<S: Storage> {
    log: PartitionLog<S>,
    state: AppendState,
}

impl<S: Storage> std::fmt::Debug for AppendFuture<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendFuture").finish_non_exhaustive()
    }
}

impl<S: Storage> Future for AppendFuture<S> {
    type Output = Result<AppendAck, LogError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (ack, end) = match &mut this.state {
            AppendState::Failed(e) => {
                return Poll::Ready(Err(e.take().unwrap_or(LogError::Closed {
                    partition: this.log.inner.partition,
                })))
            }
            AppendState::Waiting { ack, end } => (*ack, *end),
        };
        let mut st = this.log.inner.st.borrow_mut();
        if let Some(cause) = &st.poison {
            if end <= st.poison_mark {
                return Poll::Ready(Ok(ack));
            }
            return Poll::Ready(Err(LogError::Poisoned {
                partition: this.log.inner.partition,
                cause: cause.clone(),
            }));
        }
        if this.log.ack_mark(&st).next_offset >= end {
            return Poll::Ready(Ok(ack));
        }
        st.acks.insert(end, cx.waker().clone());
        Poll::Pending
    }
}

/// Waits until no sync round runs, then marks one running.
struct RoundWait<'a, S: Storage> {
    log: &'a PartitionLog<S>,
}

impl<S: Storage> Future for RoundWait<'_, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.log.inner.st.borrow_mut();
        if st.round_running {
            st.round_waiters.push(cx.waker().clone());
            return Poll::Pending;
        }
        st.round_running = true;
        Poll::Ready(())
    }
}

/// The running sync round; ends it (and wakes the next) when dropped,
/// also when the round's future is dropped half way.
struct RoundTurn<'a, S: Storage> {
    log: &'a PartitionLog<S>,
}

impl<S: Storage> Drop for RoundTurn<'_, S> {
    fn drop(&mut self) {
        let waiters = {
            let mut st = self.log.inner.st.borrow_mut();
            st.round_running = false;
            std::mem::take(&mut st.round_waiters)
        };
        for w in waiters {
            w.wake();
        }
    }
}

struct FlushWait<S: Storage> {
    log: PartitionLog<S>,
    target: u64,
}

impl<S: Storage> Future for FlushWait<S> {
    type Output = Result<(), LogError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.log.inner.st.borrow_mut();
        if st.poison.is_some() {
            return Poll::Ready(Err(self.log.poisoned_error(&st)));
        }
        if st.written.next_offset >= self.target {
            return Poll::Ready(Ok(()));
        }
        st.flushes.push((self.target, cx.waker().clone()));
        Poll::Pending
    }
}

impl<S: Storage> PartitionLog<S> {
    fn from_parts(
        storage: S,
        dir: PathBuf,
        partition: u64,
        config: LogConfig,
        segments: VecDeque<Segment<S::File>>,
        last_timestamp: u64,
    ) -> PartitionLog<S> {
        let (mark, next_offset) = match segments.back() {
            Some(s) => (
                Mark {
                    segment: s.base_offset,
                    end: s.len,
                    next_offset: s.next_offset,
                    last_batch: s.last_batch,
                    last_timestamp: s.last_timestamp,
                },
                s.next_offset,
            ),
            None => (
                Mark {
                    segment: 0,
                    end: 0,
                    next_offset: 0,
                    last_batch: None,
                    last_timestamp: 0,
                },
                0,
            ),
        };
        let interval = match config.fsync {
            FsyncPolicy::Interval(d) => Some(d),
            _ => None,
        };
        let log = PartitionLog {
            inner: Rc::new(Inner {
                partition,
                dir,
                config,
                storage,
                closing: Rc::new(event::Event::default()),
                st: RefCell::new(State {
                    segments,
                    next_offset,
                    last_timestamp,
                    next_seq: 0,
                    inflight: VecDeque::new(),
                    written: mark,
                    durable: mark,
                    acks: BTreeMap::new(),
                    flushes: Vec::new(),
                    poison: None,
                    poison_mark: 0,
                    syncing: false,
                    round_running: false,
                    round_waiters: Vec::new(),
                    names_dirty: false,
                    closed: false,
                    appends: 0,
                    syncs: 0,
                    offsets: offsets::Offsets::default(),
                }),
            }),
        };
        if let Some(every) = interval {
            let weak = Rc::downgrade(&log.inner);
            monoio::spawn(async move {
                loop {
                    monoio::time::sleep(every).await;
                    let Some(inner) = weak.upgrade() else { return };
                    let log = PartitionLog { inner };
                    let (closed, busy) = {
                        let st = log.inner.st.borrow();
                        (st.closed || st.poison.is_some(), st.syncing)
                    };
                    if closed {
                        return;
                    }
                    if !busy {
                        log.inner.st.borrow_mut().syncing = true;
                        let _ = log.sync_once().await;
                        log.inner.st.borrow_mut().syncing = false;
                    }
                }
            });
        }
        log
    }
}
