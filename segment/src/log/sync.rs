//! Group commit and flushes. A sync round `fdatasync`s every file with
//! writes completed since the round before it started (and the directory,
//! if a name changed since), then makes the written mark it saw when it
//! started the durable mark. Under a policy that acknowledges durable
//! appends up to [`ROUNDS_IN_FLIGHT`] rounds run at once, so a write that
//! completes while a round syncs gets a sync of its own at once instead of
//! waiting for that round to end; rounds publish in the order they started.
//! Failures poison the log.
//!
//! Why round k may publish its start's written mark once every round
//! started before it has published, and not sooner: a write completed
//! before round k started made its file dirty, and the first round started
//! after it (some j <= k) found the file dirty and synced it, with a sync
//! issued after the write completed, which covers it. Round k's own syncs
//! cover only the files dirtied since round k-1 started; the older writes
//! are round j's, which may still be running when k's syncs end.
//!
//! A round runs as a task of its own: no caller's dropped future can end it
//! half way, with its files' dirty flags taken and their syncs not done.
//!
//! A round that syncs the directory syncs alone: it waits until no other
//! round of the log is syncing, and no round starts syncing while it does.
//! On btrfs (Linux 6.18), a thread that `fsync`s a directory holding a new
//! name and then `fdatasync`s a file, while another thread `fdatasync`s
//! the same file, can lose the first thread's data although its
//! `fdatasync` returned (`scripts/btrfs-fsync-race.sh`: 12 of 80 tries when
//! both threads sync the directory and the file, 6 of 80 when the other
//! syncs only the file). Rounds that sync only files run side by side.

use super::error::{LogError, Poison};
use super::partition::{Mark, PartitionLog, Round, State};
use super::segment::{SegState, Segment};
use super::sync_gate;
use super::visible::set_visible;
use crate::io::{Storage, StorageFile};
use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Sync rounds one log runs at once under a policy that acknowledges
/// durable appends (one under the others: their rounds wait for no one).
pub(super) const ROUNDS_IN_FLIGHT: usize = 2;

/// What [`PartitionLog::start_round`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Started {
    /// A round was started, or one waiting to start will take everything
    /// written so far.
    Yes,
    /// Nothing was written or named since the last round started.
    NothingToSync,
    /// As many rounds run as may.
    Full,
    Poisoned,
}

impl<S: Storage> PartitionLog<S> {
    /// Under `fsync=interval`, a task that runs a sync round every `every`
    /// (unless one runs already) until the log is closed or dropped.
    pub(super) fn spawn_interval_syncs(&self, every: std::time::Duration) {
        let weak = Rc::downgrade(&self.inner);
        monoio::spawn(async move {
            loop {
                monoio::time::sleep(every).await;
                let Some(inner) = weak.upgrade() else { return };
                let log = PartitionLog { inner };
                let mut st = log.inner.st.borrow_mut();
                if st.closed || st.poison.is_some() {
                    return;
                }
                // A round still running when the next is due: skip a turn.
                log.start_round(&mut st);
                drop(st);
            }
        });
    }

    pub(super) fn poison(
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
        let mut wake: Vec<Waker> = std::mem::take(&mut st.acks)
            .into_values()
            .chain(std::mem::take(&mut st.flushes).into_iter().map(|(_, w)| w))
            .collect();
        for seg in st.segments.iter() {
            seg.drained.set();
        }
        wake.append(&mut st.round_waiters);
        for w in wake {
            w.wake();
        }
    }

    pub(super) fn ack_mark(&self, st: &State<S::File>) -> Mark {
        if self.inner.config.fsync.acks_durable() {
            st.durable
        } else {
            st.written
        }
    }

    /// Starts a sync round if one may start and has anything to sync. The
    /// round's task takes the dirty files and its target when it first
    /// runs, so the writes completing before then (the rest of this turn
    /// of the shard's loop) are its too.
    pub(super) fn start_round(&self, st: &mut State<S::File>) -> Started {
        let inner = &self.inner;
        if st.poison.is_some() {
            return Started::Poisoned;
        }
        let covered = match st.rounds.back() {
            // One about to start covers everything written so far.
            Some(Round { target: None, .. }) => return Started::Yes,
            Some(Round {
                target: Some(t), ..
            }) => *t,
            None => st.durable,
        };
        let most = if inner.config.fsync.acks_durable() {
            ROUNDS_IN_FLIGHT
        } else {
            1
        };
        if st.rounds.len() >= most {
            return Started::Full;
        }
        if st.written.next_offset <= covered.next_offset
            && !st.names_dirty
            && !st.segments.iter().any(|s| s.dirty)
        {
            return Started::NothingToSync;
        }
        let seq = st.next_round;
        st.next_round += 1;
        st.rounds.push_back(Round {
            seq,
            target: None,
            synced: false,
        });
        let log = self.clone();
        monoio::spawn(async move { log.run_round(seq).await });
        Started::Yes
    }

    /// A round: it takes the dirty files and the written mark, syncs them,
    /// publishes (with any rounds after it that ended first), then starts
    /// the next round if writes completed meanwhile.
    async fn run_round(self, seq: u64) {
        let inner = &self.inner;
        let (files, dir) = {
            let mut st = inner.st.borrow_mut();
            let target = st.written;
            let Some(round) = st.rounds.iter_mut().find(|r| r.seq == seq) else {
                return;
            };
            round.target = Some(target);
            let files: Vec<(S::File, PathBuf)> = st
                .segments
                .iter_mut()
                .filter(|s| s.dirty)
                .filter_map(|s| {
                    s.dirty = false;
                    s.writer.clone().map(|w| (w, s.log_path.clone()))
                })
                .collect();
            st.syncs += files.len() as u64;
            (files, std::mem::take(&mut st.names_dirty))
        };
        // A round that syncs the directory syncs alone (see the module doc).
        EnterSyncs {
            log: &self,
            alone: dir,
        }
        .await;
        let mut failed = None;
        if dir {
            if let Err(e) = inner.storage.sync_dir(&inner.dir).await {
                failed = Some(("directory sync", inner.dir.clone(), e));
            }
        }
        if failed.is_none() {
            for (file, path) in files {
                let _turn = sync_gate::turn(inner.config.syncs).await;
                if let Err(e) = file.sync_data().await {
                    failed = Some(("fdatasync", path, e));
                    break;
                }
            }
        }
        let mut st = inner.st.borrow_mut();
        // The rounds waiting to start their syncs, woken with the rest.
        let mut wake = st.syncing.leave(dir);
        if let Some((op, path, e)) = failed {
            self.poison(&mut st, op, path, e);
        }
        if st.poison.is_some() {
            st.rounds.retain(|r| r.seq != seq);
        } else {
            if let Some(r) = st.rounds.iter_mut().find(|r| r.seq == seq) {
                r.synced = true;
            }
            wake.extend(self.publish(&mut st));
            if inner.config.fsync.acks_durable() {
                self.start_round(&mut st);
            }
        }
        wake.append(&mut st.round_waiters);
        drop(st);
        for w in wake {
            w.wake();
        }
    }

    /// Publishes the rounds at the front whose syncs ended: the durable
    /// mark moves to the last one's target. Returns the appends to wake.
    fn publish(&self, st: &mut State<S::File>) -> Vec<Waker> {
        let mut published = None;
        while let Some(r) = st.rounds.front() {
            if !r.synced {
                break;
            }
            published = r.target;
            st.rounds.pop_front();
        }
        let Some(target) = published else {
            return Vec::new();
        };
        if target.next_offset >= st.durable.next_offset {
            st.durable = target;
        }
        st.debug_check_marks();
        mark_index_durable(&mut st.segments, target);
        let mut wake = Vec::new();
        if self.inner.config.fsync.acks_durable() {
            set_visible(st, target);
            wake = take_acks(st, target.next_offset);
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
        for base in flush_index {
            let log = self.clone();
            monoio::spawn(async move { log.flush_index(base).await });
        }
        wake
    }

    pub(super) fn poisoned_error(&self, st: &State<S::File>) -> LogError {
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
        // A round that covers it all, and every round before it, ended.
        self.rounds_cover().await
    }

    /// Runs `syncs` alone: no sync round of the log syncs beside it (see
    /// the module doc). For the seal under `never`, which syncs its own
    /// segment and the directory outside the rounds.
    pub(super) async fn sync_alone<T>(&self, syncs: impl Future<Output = T>) -> T {
        EnterSyncs {
            log: self,
            alone: true,
        }
        .await;
        let out = syncs.await;
        let waiting = self.inner.st.borrow_mut().syncing.leave(true);
        for w in waiting {
            w.wake();
        }
        out
    }

    /// Starts a round if anything was written, named or left dirty since
    /// the last one started, then waits until it and every round before it
    /// published: every write completed before the call, and every name
    /// changed before it, is then durable.
    pub(super) async fn rounds_cover(&self) -> Result<(), LogError> {
        RoundsCover {
            log: self,
            upto: None,
        }
        .await
    }
}

/// The file a poisoned log leaves in its directory for the next open.
pub const POISON_MARKER: &str = "POISONED";

/// Index entries written to the file at a time for an active segment.
const INDEX_FLUSH_ENTRIES: usize = 256;

/// After a sync that covered `mark`: index entries below it are durable.
/// Never past it: a tail-checked recovery (`OpenCheck::Tail`) verifies a
/// segment only from its last index entry on, so an entry flushed for a
/// batch the sync did not cover (a later segment's, or past `mark.end`)
/// would let a torn batch through after a power cut.
pub(super) fn mark_index_durable<F>(segments: &mut VecDeque<Segment<F>>, mark: Mark) {
    for seg in segments.iter_mut().rev() {
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

pub(super) fn take_acks<F>(st: &mut State<F>, upto: u64) -> Vec<Waker> {
    let later = st.acks.split_off(&(upto.saturating_add(1)));
    std::mem::replace(&mut st.acks, later)
        .into_values()
        .collect()
}

/// Resolves when a round may start its syncs: alone, once no round is
/// syncing; side by side, once no round syncs alone.
struct EnterSyncs<'a, S: Storage> {
    log: &'a PartitionLog<S>,
    alone: bool,
}

impl<S: Storage> Future for EnterSyncs<'_, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.log.inner.st.borrow_mut();
        let s = &mut st.syncing;
        if s.alone || (self.alone && s.side_by_side > 0) {
            s.waiting.push(cx.waker().clone());
            return Poll::Pending;
        }
        if self.alone {
            s.alone = true;
        } else {
            s.side_by_side += 1;
        }
        Poll::Ready(())
    }
}

/// Starts a round if anything is left to sync, then waits until it and
/// every round before it published.
struct RoundsCover<'a, S: Storage> {
    log: &'a PartitionLog<S>,
    /// Rounds numbered below this must end.
    upto: Option<u64>,
}

impl<S: Storage> Future for RoundsCover<'_, S> {
    type Output = Result<(), LogError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let log = self.log;
        let mut st = log.inner.st.borrow_mut();
        if self.upto.is_none() {
            match log.start_round(&mut st) {
                Started::Yes | Started::NothingToSync => self.upto = Some(st.next_round),
                Started::Full => {}
                Started::Poisoned => return Poll::Ready(Err(log.poisoned_error(&st))),
            }
        }
        if st.poison.is_some() {
            return Poll::Ready(Err(log.poisoned_error(&st)));
        }
        if let Some(upto) = self.upto {
            if st.rounds.front().is_none_or(|r| r.seq >= upto) {
                return Poll::Ready(Ok(()));
            }
        }
        st.round_waiters.push(cx.waker().clone());
        Poll::Pending
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::index::IndexEntry;
    use std::path::Path;

    /// A segment at `base` of `len` bytes with batches at `positions`.
    fn segment(base: u64, len: u64, positions: &[u32]) -> Segment<()> {
        let unmapped: crate::log::map_slot::Mapper =
            Rc::new(|_: &Path, _: usize| Err(std::io::ErrorKind::Unsupported.into()));
        let mut seg = Segment::new(Path::new("/nowhere"), base, None, unmapped, None);
        seg.len = len;
        seg.index = positions
            .iter()
            .zip(0u32..)
            .map(|(&position, rel_offset)| IndexEntry {
                rel_offset,
                position,
                timestamp: 1,
            })
            .collect();
        seg
    }

    fn mark(segment: u64, end: u64) -> Mark {
        Mark {
            segment,
            end,
            next_offset: 0,
            last_batch: None,
            last_timestamp: 0,
        }
    }

    fn durable(segments: &VecDeque<Segment<()>>) -> Vec<usize> {
        segments.iter().map(|s| s.index_durable).collect()
    }

    /// Entries become durable up to the synced mark and never past it: an
    /// older segment whole, the mark's segment below its end, a later
    /// segment (rolled after the round took its target) not at all.
    #[test]
    fn index_entries_become_durable_up_to_the_mark_and_never_past_it() {
        let mut segs: VecDeque<_> = [
            segment(0, 900, &[0, 300, 600]),
            segment(3, 700, &[0, 200, 400, 600]),
            segment(7, 500, &[0, 250]),
        ]
        .into();
        mark_index_durable(&mut segs, mark(3, 400));
        assert_eq!(
            durable(&segs),
            [3, 2, 0],
            "the batch at 400 ends past the mark"
        );
        mark_index_durable(&mut segs, mark(3, 401));
        assert_eq!(durable(&segs), [3, 3, 0]);
        // A later mark in the last segment: the one before it whole.
        mark_index_durable(&mut segs, mark(7, 250));
        assert_eq!(durable(&segs), [3, 4, 1]);
        // An older mark takes nothing back.
        mark_index_durable(&mut segs, mark(3, 100));
        assert_eq!(durable(&segs), [3, 4, 1]);
        // A mark in the first segment leaves the later ones as they were.
        let mut fresh: VecDeque<_> =
            [segment(0, 900, &[0, 300, 600]), segment(3, 700, &[0])].into();
        mark_index_durable(&mut fresh, mark(0, 600));
        assert_eq!(durable(&fresh), [2, 0]);
        // A round that took its target just after a roll, before anything
        // was written to the new segment: the older one is whole.
        let mut rolled: VecDeque<_> = [segment(0, 900, &[0, 300, 600]), segment(3, 0, &[])].into();
        mark_index_durable(&mut rolled, mark(3, 0));
        assert_eq!(durable(&rolled), [3, 0]);
    }
}
