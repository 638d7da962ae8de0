//! Group commit and flushes: one sync round at a time `fdatasync`s every
//! file with completed writes and advances the durable mark to the written
//! mark it saw when it started; failures poison the log.

use super::error::{LogError, Poison};
use super::partition::{Mark, PartitionLog, State};
use super::segment::SegState;
use super::sync_gate;
use super::visible::set_visible;
use crate::io::{Storage, StorageFile};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

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

    pub(super) fn ack_mark(&self, st: &State<S::File>) -> Mark {
        if self.inner.config.fsync.acks_durable() {
            st.durable
        } else {
            st.written
        }
    }

    /// Group commit: while writes completed past the durable mark, sync
    /// every file they touched, then advance the durable mark.
    pub(super) async fn sync_loop(self) {
        while let Ok(true) = self.sync_once().await {}
        self.inner.st.borrow_mut().syncing = false;
    }

    /// One round of syncing; false when there was nothing to sync.
    pub(super) async fn sync_once(&self) -> Result<bool, LogError> {
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
            let _turn = sync_gate::turn(inner.config.syncs).await;
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
        st.debug_check_marks();
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
}

/// The file a poisoned log leaves in its directory for the next open.
pub const POISON_MARKER: &str = "POISONED";

/// Index entries written to the file at a time for an active segment.
const INDEX_FLUSH_ENTRIES: usize = 256;

/// After a sync that covered `mark`: index entries below it are durable.
pub(super) fn mark_index_durable<F>(st: &mut State<F>, mark: Mark) {
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

pub(super) fn take_acks<F>(st: &mut State<F>, upto: u64) -> Vec<Waker> {
    let later = st.acks.split_off(&(upto.saturating_add(1)));
    std::mem::replace(&mut st.acks, later)
        .into_values()
        .collect()
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
