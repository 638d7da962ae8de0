//! The partition log's type, its state and the invariants that hold
//! between its marks. The operations live beside it: `append.rs`,
//! `sync.rs`, `seal.rs`, `retention.rs`, `poll.rs`, `offsets.rs`, and
//! opening in `recovery.rs`.
//!
//! # Marks
//!
//! `durable ≤ written ≤ next_offset`, all in offsets: the *written mark*
//! covers completed writes, in order; the *durable mark* covers what a
//! completed sync round saw written when it started; `next_offset` is the
//! offset the next append gets. Each segment's `visible` end never passes
//! the acknowledgement mark (durable under `fsync=batch`, written
//! otherwise). `inflight` holds the writes not yet under the written mark,
//! in the order of their sequence numbers, with no gap.

use super::config::{FsyncPolicy, LogConfig, Retention};
use super::error::Poison;
use super::event;
use super::map_slot;
use super::segment::{SegState, Segment, Visible};
use super::waiters::Waiters;
use crate::io::Storage;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

/// What an append stored. New fields may be added: read it, or make one
/// with `AppendAck::default()` and set its fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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

/// A partition's size and offsets. New fields may be added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Offset after the last message appended, visible or in flight: the
    /// `base_offset` the next append gets.
    pub end_offset: u64,
    /// The newest `base_timestamp` stored: the next append's is never
    /// below it.
    pub last_timestamp: u64,
    /// The commit mark, for a log opened with `LogConfig::commit_gate`:
    /// readers see nothing at or past it.
    pub commit_mark: Option<u64>,
}

/// One partition's log. Cheap to clone; all clones are the same log, and it
/// lives on one thread (a shard).
pub struct PartitionLog<S: Storage> {
    pub(super) inner: Rc<Inner<S>>,
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

pub(super) struct Inner<S: Storage> {
    pub(super) partition: u64,
    pub(super) dir: PathBuf,
    pub(super) config: LogConfig,
    /// Which sealed segments may be deleted: `config.retention` until
    /// [`PartitionLog::set_retention`] changes it.
    pub(super) retention: Cell<Retention>,
    pub(super) storage: S,
    /// Set when the log is closed: cuts short a seal's wait for write-back.
    pub(super) closing: Rc<event::Event>,
    pub(super) st: RefCell<State<S::File>>,
}

/// A point in the log: after the batch ending at `end` in segment `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) segment: u64,
    pub(super) end: u64,
    pub(super) next_offset: u64,
    pub(super) last_batch: Option<u64>,
    pub(super) last_timestamp: u64,
}

/// A sync round started and not yet published (`sync.rs`).
pub(super) struct Round {
    pub(super) seq: u64,
    /// The written mark when the round started; `None` until its task
    /// first runs.
    pub(super) target: Option<Mark>,
    /// Its syncs ended; it publishes when the rounds before it have.
    pub(super) synced: bool,
}

pub(super) struct Inflight {
    pub(super) seq: u64,
    pub(super) mark: Mark,
    pub(super) done: bool,
}

pub(super) struct State<F> {
    pub(super) segments: VecDeque<Segment<F>>,
    pub(super) next_offset: u64,
    pub(super) last_timestamp: u64,
    pub(super) next_seq: u64,
    pub(super) inflight: VecDeque<Inflight>,
    pub(super) written: Mark,
    pub(super) durable: Mark,
    /// Appends waiting for the acknowledgement mark, by end offset.
    pub(super) acks: BTreeMap<u64, Waker>,
    /// Flushes waiting for the written mark.
    pub(super) flushes: Vec<(u64, Waker)>,
    pub(super) poison: Option<Arc<Poison>>,
    /// The acknowledgement mark when the log was poisoned.
    pub(super) poison_mark: u64,
    /// The sync rounds started and not yet published, oldest first
    /// (`sync.rs`): each round's target becomes the durable mark only once
    /// every round started before it has published.
    pub(super) rounds: VecDeque<Round>,
    /// The number the next sync round takes.
    pub(super) next_round: u64,
    /// Flushes waiting for rounds to end.
    pub(super) round_waiters: Vec<Waker>,
    /// A segment file was created since the last directory sync.
    pub(super) names_dirty: bool,
    /// The rounds syncing now (see `sync.rs`: one that syncs the directory
    /// syncs alone).
    pub(super) syncing: super::sync_phase::Syncing,
    pub(super) closed: bool,
    /// The log was opened from its clean-close record, which is still in
    /// its directory and still true: nothing changed since.
    pub(super) clean_record: bool,
    pub(super) appends: u64,
    pub(super) syncs: u64,
    pub(super) offsets: Offsets,
    /// Readers stop here too (`commit.rs`): `Some` under
    /// `LogConfig::commit_gate`.
    pub(super) commit: Option<u64>,
    /// Readers waiting for the visible end to move (`wait.rs`).
    pub(super) waiters: Waiters,
}

impl<F> State<F> {
    pub(super) fn segment_mut(&mut self, base: u64) -> Option<&mut Segment<F>> {
        let i = self
            .segments
            .partition_point(|s| s.base_offset <= base)
            .checked_sub(1)?;
        self.segments.get_mut(i).filter(|s| s.base_offset == base)
    }

    pub(super) fn active(&self) -> Option<&Segment<F>> {
        self.segments.back()
    }

    /// The invariants between the marks and the in-flight FIFO (see the
    /// module doc), checked in debug builds after every change of them.
    pub(super) fn debug_check_marks(&self) {
        debug_assert!(
            self.durable.next_offset <= self.written.next_offset,
            "durable mark {} past written mark {}",
            self.durable.next_offset,
            self.written.next_offset
        );
        debug_assert!(
            self.written.next_offset <= self.next_offset,
            "written mark {} past the next offset {}",
            self.written.next_offset,
            self.next_offset
        );
        debug_assert!(
            self.inflight
                .iter()
                .zip(self.inflight.iter().skip(1))
                .all(|(a, b)| a.seq + 1 == b.seq && a.mark.next_offset <= b.mark.next_offset),
            "in-flight writes are in sequence order without gaps"
        );
        debug_assert!(
            self.inflight
                .back()
                .is_none_or(|w| w.seq + 1 == self.next_seq),
            "the last in-flight write is the last issued"
        );
    }
}

/// The consumer offsets a log has stored or read (see `offsets.rs`).
#[derive(Debug, Default)]
pub(super) struct Offsets {
    pub(super) cache: HashMap<u64, u64>,
    pub(super) next_seq: u64,
    /// The last store landed or delete begun, per consumer, while an
    /// operation on that consumer runs (its entry goes with the last one:
    /// an operation started later has a higher seq, for which a missing
    /// entry says the same, and a client naming ever new consumers grows
    /// nothing).
    pub(super) committed: HashMap<u64, u64>,
    /// Stores, deletes and reads of each consumer's offset running now.
    pub(super) running: HashMap<u64, u32>,
    /// The consumers with an offset file, counted against
    /// `max_consumer_offsets` (keys from [`FIRST_RESERVED_CONSUMER`] up are
    /// not); listed from the directory at this run's first store.
    ///
    /// [`FIRST_RESERVED_CONSUMER`]: super::offsets::FIRST_RESERVED_CONSUMER
    pub(super) stored: Option<HashSet<u64>>,
    /// The `consumers` directory's own name is known durable (its parent
    /// was synced after it was created, in this run of the log).
    pub(super) dir_durable: bool,
    /// Consumers whose offset file a store renames, a delete removes or a
    /// read reads right now, with the event that ends that turn.
    pub(super) busy: HashMap<u64, Rc<event::Event>>,
    /// Consumers whose torn offset file was already reported in this run.
    pub(super) torn_reported: HashSet<u64>,
}

impl<S: Storage> PartitionLog<S> {
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

    /// The retention limits in force (see [`PartitionLog::set_retention`]).
    pub fn retention(&self) -> Retention {
        self.inner.retention.get()
    }

    /// Replaces the retention limits for this log (until it is closed; the
    /// next open takes its configuration's again). The next
    /// [`PartitionLog::enforce_retention`] applies them.
    pub fn set_retention(&self, retention: Retention) {
        self.inner.retention.set(retention);
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
            end_offset: st.next_offset,
            last_timestamp: st.last_timestamp,
            commit_mark: st.commit,
        }
    }

    pub(super) fn visible_next_offset(&self, st: &State<S::File>) -> u64 {
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

    /// Whether the log was closed ([`PartitionLog::close`], or a suffix
    /// cut that reopened it as a new log): it refuses appends.
    pub fn is_closed(&self) -> bool {
        self.inner.st.borrow().closed
    }

    /// Whether nothing is in flight: no write, acknowledgement, flush or
    /// sync round waiting, and no segment being sealed. An idle log can be
    /// closed without failing anyone's request.
    pub fn is_idle(&self) -> bool {
        let st = self.inner.st.borrow();
        st.inflight.is_empty()
            && st.acks.is_empty()
            && st.flushes.is_empty()
            && st.rounds.is_empty()
            && st
                .segments
                .iter()
                .all(|s| s.state != super::segment::SegState::Sealing)
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

    pub(super) fn from_parts(
        storage: S,
        dir: PathBuf,
        partition: u64,
        config: LogConfig,
        mut segments: VecDeque<Segment<S::File>>,
        last_timestamp: u64,
    ) -> PartitionLog<S> {
        // Recovery read the sealed segments through mappings: keep a few.
        release_idle_maps(&mut segments);
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
        // Under a commit gate nothing is served until the owner sets the
        // mark: what recovery found may not be committed.
        let commit = config.commit_gate.then(|| {
            for s in segments.iter_mut() {
                s.visible = Visible {
                    len: 0,
                    next_offset: s.base_offset,
                    last_batch: None,
                    last_timestamp: 0,
                };
            }
            segments.front().map_or(0, |s| s.base_offset)
        });
        let interval = match config.fsync {
            FsyncPolicy::Interval(d) => Some(d),
            _ => None,
        };
        let log = PartitionLog {
            inner: Rc::new(Inner {
                partition,
                dir,
                retention: Cell::new(config.retention),
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
                    rounds: VecDeque::new(),
                    next_round: 0,
                    round_waiters: Vec::new(),
                    names_dirty: false,
                    syncing: Default::default(),
                    closed: false,
                    clean_record: false,
                    appends: 0,
                    syncs: 0,
                    offsets: Offsets::default(),
                    commit,
                    waiters: Waiters::default(),
                }),
            }),
        };
        if let Some(every) = interval {
            log.spawn_interval_syncs(every);
        }
        log
    }
}

/// Gives back the mappings of sealed segments beyond the few a partition
/// keeps (see `map_slot.rs`).
pub(super) fn release_idle_maps<F>(segments: &mut VecDeque<Segment<F>>) {
    // Runs after every poll: nothing to give back is the common case, and
    // it costs no allocation.
    let sealed_mapped = segments
        .iter()
        .filter(|s| s.state == SegState::Sealed && s.map.is_mapped())
        .count();
    if sealed_mapped <= map_slot::MAPPED_SEALED {
        return;
    }
    map_slot::release_idle(
        segments
            .iter_mut()
            .filter(|s| s.state == SegState::Sealed)
            .map(|s| &mut s.map),
    );
}
