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

/// An entry to apply: its place in the log and its command.
#[derive(Debug)]
pub(crate) struct ApplyItem {
    pub index: u64,
    pub term: u64,
    pub cmd: ApplyCmd,
}

type InFlight = Pin<Box<dyn Future<Output = Applied>>>;

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
            } => {
                let reply = self.engine.set_commit_mark(partition, mark);
                Box::pin(async move {
                    reply.await?;
                    Ok(ack.map_or(Done::Replayed, Done::Appended))
                })
            }
            ApplyCmd::StoreOffset {
                partition,
                consumer,
                offset,
            } => {
                let reply = self.engine.store_offset(partition, consumer, offset);
                Box::pin(async move { reply.await.map(|()| Done::Count(0)) })
            }
            ApplyCmd::DeleteOffset {
                partition,
                consumer,
            } => {
                let reply = self.engine.delete_offset(partition, consumer);
                Box::pin(async move { reply.await.map(|had| Done::Count(u64::from(had))) })
            }
            ApplyCmd::DeleteSegments {
                partition,
                count,
                index,
            } => {
                let engine = self.engine.clone();
                let done = engine.load_offset(partition, DELETED_AT);
                Box::pin(async move {
                    if done.await?.is_some_and(|at| at >= index) {
                        return Ok(Done::Count(0));
                    }
                    // Recorded first: a crash between the two loses a
                    // deletion (retention asks again), never a segment.
                    engine.store_offset(partition, DELETED_AT, index).await?;
                    let gone = engine.delete_segments(partition, count).await?;
                    Ok(Done::Count(gone.len() as u64))
                })
            }
            ApplyCmd::Skip => Box::pin(async { Ok(Done::Count(0)) }),
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
            let Poll::Ready(result) = fut.as_mut().poll(cx) else {
                break;
            };
            if let Err(e) = &result {
                tracing::error!("group {}: applying entry {index}: {e}", this.group);
            }
            let msg = Inbox::Applied {
                index: *index,
                term: *term,
                result,
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
