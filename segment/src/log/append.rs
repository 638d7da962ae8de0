//! The append path: stamp, reserve the byte range, spawn the write; the
//! written mark advanced over completed writes, in order; rotation to the
//! next segment.

use super::error::{AppendError, LogError};
use super::index;
use super::map_slot::mapper;
use super::partition::{AppendAck, Inflight, Mark, PartitionLog, State};
use super::segment::{log_name, SegState, Segment};
use super::sync::take_acks;
use super::visible::set_visible;
use crate::format::layout::BATCH_HEADER_LEN;
use crate::format::{Batch, Stamp};
use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A batch to append: fresh from a producer, or stamped by a leader.
enum Incoming {
    Fresh(Batch),
    Stamped(Batch),
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl<S: Storage> PartitionLog<S> {
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

    /// Takes the stamp and the byte range of a batch and spawns its write;
    /// returns the acknowledgement and the offset the ack waits for.
    fn reserve(&self, incoming: Incoming) -> Result<(AppendAck, u64), AppendError> {
        let mut st = self.inner.st.borrow_mut();
        self.check_accepting(&st)?;
        let (bufs, timestamp, count) = self.prepare(&st, incoming)?;
        let len = bufs.len() as u64;
        let max = self.inner.config.limits.max_batch_bytes;
        if len > max {
            // Segments are mapped at segment_bytes + max_batch_bytes: a
            // larger batch could be neither served nor recovered.
            return Err(AppendError::TooLarge(crate::format::BatchError::TooLarge {
                declared: len,
                max,
            }));
        }
        self.leave_clean(&mut st).map_err(|e| {
            AppendError::io("remove the clean-close record", self.inner.dir.clone(), e)
        })?;
        let needs_rotation = st
            .active()
            .map(|a| a.len >= self.inner.config.segment_bytes)
            .unwrap_or(true);
        if needs_rotation {
            self.rotate(&mut st)?;
        }
        let (ack, seq, file) = self.place(&mut st, len, count, timestamp)?;
        st.debug_check_marks();
        drop(st);
        self.spawn_write(seq, file, ack.position, bufs);
        Ok((ack, ack.base_offset + u64::from(count)))
    }

    fn check_accepting(&self, st: &State<S::File>) -> Result<(), AppendError> {
        if let Some(cause) = &st.poison {
            return Err(AppendError::Log(LogError::Poisoned {
                partition: self.inner.partition,
                cause: cause.clone(),
            }));
        }
        if st.closed {
            return Err(AppendError::Log(LogError::Closed {
                partition: self.inner.partition,
            }));
        }
        Ok(())
    }

    /// The bytes to write for `incoming`, its `base_timestamp` and message
    /// count: a fresh batch gets its stamp; a stamped one must continue the
    /// log.
    fn prepare(
        &self,
        st: &State<S::File>,
        incoming: Incoming,
    ) -> Result<(WriteBufs, u64, u32), AppendError> {
        let partition = self.inner.partition;
        match incoming {
            Incoming::Fresh(mut batch) => {
                let ts = now_micros().max(st.last_timestamp);
                let header = batch.stamped_header(Stamp {
                    partition_id: partition,
                    base_offset: st.next_offset,
                    base_timestamp: ts,
                });
                let count = batch.as_ref().message_count();
                let body = batch.into_bytes().slice(BATCH_HEADER_LEN..);
                let bufs = WriteBufs {
                    head: Bytes::copy_from_slice(&header.0),
                    body,
                };
                Ok((bufs, ts, count))
            }
            Incoming::Stamped(batch) => {
                let view = batch.as_ref();
                if view.partition_id() != partition {
                    return Err(AppendError::PartitionMismatch {
                        expected: partition,
                        found: view.partition_id(),
                    });
                }
                if view.base_offset() != st.next_offset {
                    return Err(AppendError::OffsetMismatch {
                        expected: st.next_offset,
                        found: view.base_offset(),
                    });
                }
                if view.base_timestamp() < st.last_timestamp {
                    return Err(AppendError::TimestampBackwards {
                        previous: st.last_timestamp,
                        found: view.base_timestamp(),
                    });
                }
                let (ts, count) = (view.base_timestamp(), view.message_count());
                Ok((WriteBufs::one(batch.into_bytes()), ts, count))
            }
        }
    }

    /// Reserves `len` bytes at the end of the active segment for a batch of
    /// `count` messages: the index entry if one is due, the segment's and
    /// the log's ends, and the write's place in the in-flight FIFO.
    fn place(
        &self,
        st: &mut State<S::File>,
        len: u64,
        count: u32,
        timestamp: u64,
    ) -> Result<(AppendAck, u64, Option<S::File>), AppendError> {
        let interval = self.inner.config.index_interval_bytes;
        let base_offset = st.next_offset;
        let next_offset = base_offset + u64::from(count);
        let Some(seg) = st.segments.back_mut() else {
            return Err(AppendError::Log(LogError::Closed {
                partition: self.inner.partition,
            }));
        };
        debug_assert_eq!(
            seg.state,
            SegState::Active,
            "appends go to the active segment"
        );
        let pos = seg.len;
        let due = seg
            .last_indexed
            .map(|p| pos - p >= interval)
            .unwrap_or(true);
        if due {
            seg.index.push(index::IndexEntry {
                rel_offset: (base_offset - seg.base_offset) as u32,
                position: pos as u32,
                timestamp,
            });
            seg.last_indexed = Some(pos);
        }
        seg.len += len;
        if let Some(writer) = &seg.writer {
            let config = &self.inner.config;
            let steps = config.preallocate.then_some(&config.preallocation);
            seg.prealloc
                .reserved(seg.len, config.segment_bytes, steps, writer, &seg.log_path);
        }
        seg.next_offset = next_offset;
        seg.last_batch = Some(pos);
        seg.last_timestamp = timestamp;
        seg.first_timestamp.get_or_insert(timestamp);
        seg.pending_writes += 1;
        let segment = seg.base_offset;
        let file = seg.writer.clone();
        st.next_offset = next_offset;
        st.last_timestamp = timestamp;
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
                last_timestamp: timestamp,
            },
            done: false,
        });
        let ack = AppendAck {
            base_offset,
            message_count: count,
            segment,
            position: pos,
            bytes: len,
            base_timestamp: timestamp,
        };
        Ok((ack, seq, file))
    }

    /// Spawns the write of a reserved batch on the ring; its completion
    /// goes to [`PartitionLog::write_done`].
    fn spawn_write(&self, seq: u64, file: Option<S::File>, pos: u64, bufs: WriteBufs) {
        let Some(file) = file else {
            // An active segment always has its writer.
            self.write_done(
                seq,
                Err(std::io::Error::other("active segment has no open file")),
            );
            return;
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
    }

    /// Creates the next segment and starts sealing the current one.
    pub(super) fn rotate(&self, st: &mut State<S::File>) -> Result<(), AppendError> {
        let inner = &self.inner;
        let base = st.next_offset;
        let path = inner.dir.join(log_name(base));
        let file = inner
            .storage
            .open(&path, true)
            .map_err(|e| AppendError::io("create segment", &path, e))?;
        let capacity = usize::try_from(inner.config.segment_capacity()).unwrap_or(usize::MAX);
        let map = file
            .map(capacity)
            .map_err(|e| AppendError::io("map segment", &path, e))?;
        if let Some(old) = st.segments.back_mut() {
            old.state = SegState::Sealing;
            old.prealloc.release();
            if old.pending_writes == 0 {
                old.drained.set();
            }
            let log = self.clone();
            let old_base = old.base_offset;
            monoio::spawn(async move { log.seal(old_base).await });
        }
        let mapper = match st.segments.back() {
            Some(s) => s.map.mapper(),
            None => mapper(&inner.storage),
        };
        let mut seg = Segment::new(&inner.dir, base, Some(map), mapper, Some(file));
        seg.visible.last_timestamp = st.last_timestamp;
        seg.last_timestamp = st.last_timestamp;
        st.segments.push_back(seg);
        st.names_dirty = true;
        Ok(())
    }

    pub(super) fn write_done(&self, seq: u64, result: std::io::Result<()>) {
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
        debug_assert_eq!(entry.seq, seq, "the in-flight FIFO has no gap");
        debug_assert!(!entry.done, "write {seq} completed twice");
        entry.done = true;
        let segment = entry.mark.segment;
        if let Some(seg) = st.segment_mut(segment) {
            debug_assert!(
                seg.pending_writes > 0,
                "a completion without a pending write"
            );
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
        debug_assert!(
            mark.next_offset >= st.written.next_offset,
            "the written mark only grows"
        );
        st.written = mark;
        st.debug_check_marks();
        let flushes = std::mem::take(&mut st.flushes);
        let (ready, waiting): (Vec<_>, Vec<_>) = flushes
            .into_iter()
            .partition(|(end, _)| *end <= mark.next_offset);
        st.flushes = waiting;
        let mut wake: Vec<Waker> = ready.into_iter().map(|(_, w)| w).collect();
        if inner.config.fsync.acks_durable() {
            self.start_round(&mut st);
        } else {
            set_visible(&mut st, mark);
            wake.extend(take_acks(&mut st, mark.next_offset));
        }
        drop(st);
        for w in wake {
            w.wake();
        }
    }
}

enum AppendState {
    Waiting { ack: AppendAck, end: u64 },
    Failed(Option<AppendError>),
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
    type Output = Result<AppendAck, AppendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (ack, end) = match &mut this.state {
            AppendState::Failed(e) => {
                return Poll::Ready(Err(e.take().unwrap_or(AppendError::Log(
                    LogError::Closed {
                        partition: this.log.inner.partition,
                    },
                ))))
            }
            AppendState::Waiting { ack, end } => (*ack, *end),
        };
        let mut st = this.log.inner.st.borrow_mut();
        if let Some(cause) = &st.poison {
            if end <= st.poison_mark {
                return Poll::Ready(Ok(ack));
            }
            return Poll::Ready(Err(AppendError::Log(LogError::Poisoned {
                partition: this.log.inner.partition,
                cause: cause.clone(),
            })));
        }
        if this.log.ack_mark(&st).next_offset >= end {
            return Poll::Ready(Ok(ack));
        }
        st.acks.insert(end, cx.waker().clone());
        Poll::Pending
    }
}
