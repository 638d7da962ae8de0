//! Applying committed entries to the engine, on the shard that owns their
//! partitions.
//!
//! A data group's loop sends its committed commands, in log order, to one
//! task running on its shard (`Handle::spawn_on`). From there every engine
//! call is local: it is placed in the partition's log synchronously, in the
//! order the task makes the calls, so applies never reorder, and they are
//! issued without waiting for each other. The task then awaits the replies
//! in the same order and reports each entry applied (with the engine's
//! acknowledgement, for the leader's waiting sends) back to the loop.
//!
//! Applying is idempotent: a batch whose `base_offset` is below the
//! partition's end is already stored (a restart replays the journal from
//! its snapshot) and counts as applied.

use crate::inbox::{Applied, Done, Inbox};
use bytes::Bytes;
use corelog::replication::ReplicaLog;
use corelog::RequestError;
use crossbeam_channel::Sender;
use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A committed command for the engine.
#[derive(Debug)]
pub(crate) enum ApplyCmd {
    /// Move a partition's commit mark past a batch its log holds.
    Commit {
        /// the partition
        partition: u64,
        /// the offset after the batch
        mark: u64,
        /// the engine's acknowledgement of the batch's write, when this
        /// node's sender waits for it
        ack: Option<corelog::AppendAck>,
        /// the batch's base offset, when the journal points at it: the
        /// applier then reads it back from the segment (`Applied`'s view)
        base: Option<u64>,
    },
    /// Store a consumer offset.
    StoreOffset {
        /// the partition
        partition: u64,
        /// the consumer key
        consumer: u64,
        /// the offset
        offset: u64,
    },
    /// Forget a consumer offset.
    DeleteOffset {
        /// the partition
        partition: u64,
        /// the consumer key
        consumer: u64,
    },
    /// Delete the oldest sealed segments, once: entry `index` is
    /// recorded in the partition (under [`DELETED_AT`]) before the
    /// segments go, and a replay of an entry at or below the recorded one
    /// (after a restart) deletes nothing more.
    DeleteSegments {
        /// the partition
        partition: u64,
        /// how many
        count: usize,
        /// the entry's index
        index: u64,
    },
    /// The store's manifest holds every offset below `end`: recorded in
    /// the partition (under [`OFFLOADED_TO`]) when above what it holds, for
    /// the tier to trim local copies below (`TierLeadership::offloaded`).
    Offloaded {
        /// the partition
        partition: u64,
        /// the manifest's end
        end: u64,
    },
    /// Nothing to store (an empty entry, or one for a deleted partition).
    Skip,
}

/// The consumer key under which a partition records the last entry whose
/// segment deletion it applied: outside every key corelog-server gives
/// consumers (numeric ids, named ones below `1 << 63 | 1 << 62`) and
/// groups (`1 << 62 | id`). Deleting by count is not idempotent, and a
/// restart replays the entries after the snapshot: without it, every
/// restart deleted one more segment per such entry.
pub(crate) const DELETED_AT: u64 = u64::MAX;

/// The consumer key under which a partition records the highest manifest
/// end its group replicated (`Command::Offloaded`): outside every consumer
/// key, like [`DELETED_AT`]. Kept on disk so that a restarted follower
/// trims without waiting for the next commit; only ever raised, so a
/// replay of older entries after a restart lowers nothing.
pub(crate) const OFFLOADED_TO: u64 = u64::MAX - 1;

// Both (`DELETED_AT` is above it) are an owner's records to the log:
// never counted against, nor refused by, `max_consumer_offsets`.
const _: () = assert!(OFFLOADED_TO >= corelog::FIRST_RESERVED_CONSUMER);

/// An entry to apply: its place in the log and its command.
#[derive(Debug)]
pub(crate) struct ApplyItem {
    pub index: u64,
    pub term: u64,
    pub cmd: ApplyCmd,
}

/// What applying an entry gave, with its batch read back from its
/// segment (a view of the mapping) once the commit mark is past it.
type InFlight = Pin<Box<dyn Future<Output = (Applied, Option<Bytes>)>>>;

/// Starts the applier of a data group on `shard`; returns where to send
/// committed entries.
pub(crate) fn start(
    engine: &corelog::Handle,
    shard: usize,
    group: u32,
    report: Sender<Inbox>,
) -> Result<UnboundedSender<Vec<ApplyItem>>, RequestError> {
    let (tx, rx) = futures_channel::mpsc::unbounded();
    let handle = engine.clone();
    engine
        .spawn_on(shard, move || Applier {
            engine: handle,
            group,
            rx,
            report,
            pending: VecDeque::new(),
            closed: false,
        })
        .wait()?;
    Ok(tx)
}

struct Applier {
    engine: corelog::Handle,
    group: u32,
    rx: UnboundedReceiver<Vec<ApplyItem>>,
    report: Sender<Inbox>,
    pending: VecDeque<(u64, u64, InFlight)>,
    closed: bool,
}

impl Applier {
    fn issue(&self, cmd: ApplyCmd) -> InFlight {
        match cmd {
            ApplyCmd::Commit {
                partition,
                mark,
                ack,
                base,
            } => {
                let reply = self.engine.set_commit_mark(partition, mark);
                // Queued behind the mark, so read once it has moved.
                let view = base.map(|b| self.engine.read_written(partition, b));
                Box::pin(async move {
                    if let Err(e) = reply.await {
                        return (Err(e), None);
                    }
                    let view = match view {
                        Some(v) => v.await.ok().flatten().map(bytes::Bytes::from),
                        None => None,
                    };
                    (Ok(ack.map_or(Done::Replayed, Done::Appended)), view)
                })
            }
            ApplyCmd::StoreOffset {
                partition,
                consumer,
                offset,
            } => {
                let reply = self.engine.store_offset(partition, consumer, offset);
                Box::pin(async move { (reply.await.map(|()| Done::Count(0)), None) })
            }
            ApplyCmd::DeleteOffset {
                partition,
                consumer,
            } => {
                let reply = self.engine.delete_offset(partition, consumer);
                Box::pin(async move {
                    let had = reply.await.map(|had| Done::Count(u64::from(had)));
                    (had, None)
                })
            }
            ApplyCmd::DeleteSegments {
                partition,
                count,
                index,
            } => {
                let engine = self.engine.clone();
                let done = engine.load_offset(partition, DELETED_AT);
                Box::pin(async move {
                    let deleted = async {
                        if done.await?.is_some_and(|at| at >= index) {
                            return Ok(Done::Count(0));
                        }
                        // Recorded first: a crash between the two loses a
                        // deletion (retention asks again), never a segment.
                        engine.store_offset(partition, DELETED_AT, index).await?;
                        let gone = engine.delete_segments(partition, count).await?;
                        Ok(Done::Count(gone.len() as u64))
                    };
                    (deleted.await, None)
                })
            }
            ApplyCmd::Offloaded { partition, end } => {
                let engine = self.engine.clone();
                Box::pin(async move {
                    let recorded = async {
                        let held = engine.load_offset(partition, OFFLOADED_TO).await?;
                        if held.is_none_or(|h| h < end) {
                            engine.store_offset(partition, OFFLOADED_TO, end).await?;
                        }
                        Ok(Done::Count(0))
                    };
                    (recorded.await, None)
                })
            }
            ApplyCmd::Skip => Box::pin(async { (Ok(Done::Count(0)), None) }),
        }
    }
}

impl Future for Applier {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        // Issue everything that arrived, in order.
        while !this.closed {
            match futures_core::Stream::poll_next(Pin::new(&mut this.rx), cx) {
                Poll::Ready(Some(items)) => {
                    for item in items {
                        let fut = this.issue(item.cmd);
                        this.pending.push_back((item.index, item.term, fut));
                    }
                }
                Poll::Ready(None) => this.closed = true,
                Poll::Pending => break,
            }
        }
        // Report what completed, in order.
        while let Some((index, term, fut)) = this.pending.front_mut() {
            let Poll::Ready((result, view)) = fut.as_mut().poll(cx) else {
                break;
            };
            if let Err(e) = &result {
                tracing::error!("group {}: applying entry {index}: {e}", this.group);
            }
            let msg = Inbox::Applied {
                index: *index,
                term: *term,
                result,
                view,
            };
            this.pending.pop_front();
            if this.report.send(msg).is_err() {
                return Poll::Ready(());
            }
        }
        if this.closed && this.pending.is_empty() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::{start, ApplyCmd, ApplyItem, DELETED_AT, OFFLOADED_TO};
    use crate::inbox::{Done, Inbox};
    use corelog::replication::ReplicaLog;
    use std::time::Duration;

    /// An engine of one shard whose logs have a commit mark, with one
    /// batch of three messages written (not committed) to partition 3.
    fn engine_with_a_batch(
        dir: &std::path::Path,
    ) -> (
        corelog::Engine,
        corelog::Handle,
        corelog::Batch,
        corelog::AppendAck,
    ) {
        let engine = corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            log: corelog::LogConfig {
                commit_gate: true,
                ..corelog::LogConfig::default()
            },
            ..corelog::Config::new(dir.join("engine"))
        })
        .expect("engine");
        let h = engine.handle();
        let mut b = corelog::BatchBuilder::new();
        for id in 1..=3 {
            b.push(corelog::MessageSpec {
                id,
                timestamp: 5,
                payload: b"applied",
                user_headers: &[],
            });
        }
        let batch = corelog::Batch::admit(b.build().expect("build"), &h.limits())
            .expect("admit")
            .stamp(corelog::Stamp {
                partition_id: 3,
                base_offset: 0,
                base_timestamp: 7,
            });
        let ack = h
            .append_stamped_admitted(3, batch.clone())
            .wait()
            .expect("written");
        (engine, h, batch, ack)
    }

    /// Applying a send moves its partition's commit mark and hands back
    /// the batch read from its segment: the bytes written, from the
    /// mapping, not the buffer they arrived in. A base offset where no
    /// batch starts gives no view, and the entry is applied all the same.
    #[test]
    fn an_applied_send_comes_back_as_a_view_of_its_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, h, batch, ack) = engine_with_a_batch(dir.path());
        let (report, reports) = crossbeam_channel::unbounded();
        let tx = start(&h, 0, 1, report).expect("applier");
        let commit = |index, mark, base| ApplyItem {
            index,
            term: 2,
            cmd: ApplyCmd::Commit {
                partition: 3,
                mark,
                ack: Some(ack),
                base,
            },
        };
        tx.unbounded_send(vec![commit(5, 3, Some(0)), commit(6, 3, Some(1))])
            .expect("sent");
        for (index, has_view) in [(5, true), (6, false)] {
            match reports
                .recv_timeout(Duration::from_secs(10))
                .expect("applied")
            {
                Inbox::Applied {
                    index: i,
                    term: 2,
                    result: Ok(Done::Appended(_)),
                    view,
                } if i == index => {
                    assert_eq!(view.is_some(), has_view, "entry {index}");
                    if let Some(v) = view {
                        assert_eq!(&v[..], &batch.bytes()[..]);
                        assert_ne!(v.as_ptr(), batch.bytes().as_ptr(), "not the buffer");
                    }
                }
                other => panic!("entry {index}: {other:?}"),
            }
        }
        drop((tx, h));
        engine.shutdown().expect("shutdown");
    }

    /// The count the applier reports for entry `index`, the next it reports.
    fn counted(reports: &crossbeam_channel::Receiver<Inbox>, index: u64) -> u64 {
        match reports
            .recv_timeout(Duration::from_secs(10))
            .expect("applied")
        {
            Inbox::Applied {
                index: i,
                result: Ok(Done::Count(n)),
                ..
            } if i == index => n,
            other => panic!("entry {index}: {other:?}"),
        }
    }

    /// A segment deletion applies once: its entry's index is recorded
    /// before the segments go, and an entry at or below the recorded one
    /// (a replay after a restart) deletes nothing more; a later entry
    /// deletes again.
    #[test]
    fn a_replayed_segment_deletion_deletes_nothing_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            log: corelog::LogConfig {
                segment_bytes: 256,
                // Sealed segments deletable at once (under `never`, 30 s
                // after they roll).
                fsync: corelog::FsyncPolicy::Batch,
                ..corelog::LogConfig::default()
            },
            ..corelog::Config::new(dir.path().join("engine"))
        })
        .expect("engine");
        let h = engine.handle();
        for id in 0..5u128 {
            let mut b = corelog::BatchBuilder::new();
            b.push(corelog::MessageSpec {
                id,
                timestamp: 5,
                payload: &[7; 300],
                user_headers: &[],
            });
            h.append(3, b.build().expect("build"))
                .wait()
                .expect("append");
        }
        let (report, reports) = crossbeam_channel::unbounded();
        let tx = start(&h, 0, 1, report).expect("applier");
        for (index, deleted) in [(5, 1), (5, 0), (4, 0), (6, 1), (6, 0)] {
            let item = ApplyItem {
                index,
                term: 2,
                cmd: ApplyCmd::DeleteSegments {
                    partition: 3,
                    count: 1,
                    index,
                },
            };
            tx.unbounded_send(vec![item]).expect("sent");
            assert_eq!(counted(&reports, index), deleted, "entry {index}");
        }
        drop((tx, h));
        engine.shutdown().expect("shutdown");
    }

    /// The replicated manifest end is only ever raised: entries applied
    /// out of the order of their ends (a replay after a restart applies
    /// older entries again) leave the highest one recorded, which is
    /// what followers trim below; and it is kept under a key of its own.
    #[test]
    fn the_offloaded_end_recorded_is_only_ever_raised() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, h, _, _) = engine_with_a_batch(dir.path());
        let (report, reports) = crossbeam_channel::unbounded();
        let tx = start(&h, 0, 1, report).expect("applier");
        for (index, end, held) in [(5, 100, 100), (6, 40, 100), (7, 100, 100), (8, 150, 150)] {
            let item = ApplyItem {
                index,
                term: 2,
                cmd: ApplyCmd::Offloaded { partition: 3, end },
            };
            tx.unbounded_send(vec![item]).expect("sent");
            assert_eq!(counted(&reports, index), 0, "entry {index}");
            let recorded = h.load_offset(3, OFFLOADED_TO).wait().expect("loaded");
            assert_eq!(recorded, Some(held), "after end {end} (entry {index})");
        }
        // Its own key: the record of applied segment deletions, which a
        // replay compares entry indexes with, is untouched.
        let deleted_at = h.load_offset(3, DELETED_AT).wait().expect("loaded");
        assert_eq!(deleted_at, None, "the manifest end written over DELETED_AT");
        drop((tx, h));
        engine.shutdown().expect("shutdown");
    }
}
