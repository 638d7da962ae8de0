//! Appends to one partition in call order, with explicit back-pressure:
//! [`Producer`].

use crate::engine::try_append::Full;
use crate::engine::Handle;
use crate::error::RequestError;
use crate::queue::Reply;
use bytes::Bytes;
use corelog_segment::log::AppendAck;
use corelog_segment::Batch;

/// Appends to one partition that are stored in the order they are sent,
/// even when the shard's queue is full: [`Producer::send`] resolves once
/// its batch is in the queue (waiting for room if need be), and takes
/// `&mut self`, so the next batch cannot be queued before it. The
/// returned [`Reply`] resolves when the batch is stored, so a producer
/// keeps many appends in flight while the queue has room and waits
/// (back-pressure) when it has not. Made by [`Handle::producer`].
///
/// Order holds among one producer's sends; two producers of a partition
/// (or a producer and plain [`Handle::append`]s) interleave. Dropping
/// `send`'s future before it resolves withdraws its batch, nothing of it
/// stored; dropping a `Reply` it gave does not (see [`Reply`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use corelog::{BatchBuilder, Config, Engine, MessageSpec};
/// let engine = Engine::open(Config::new(dir.path()))?;
/// let h = engine.handle();
/// let mut producer = h.producer(1);
/// let mut acks = Vec::new();
/// for id in 0..3 {
///     let mut b = BatchBuilder::new();
///     b.push(MessageSpec { id, timestamp: 1, payload: b"m", user_headers: b"" });
///     acks.push(producer.send_blocking(b.build()?));
/// }
/// let offsets: Vec<u64> = acks.into_iter().map(|r| r.wait().map(|a| a.base_offset)).collect::<Result<_, _>>()?;
/// assert_eq!(offsets, [0, 1, 2]);
/// engine.shutdown()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Producer {
    handle: Handle,
    partition: u64,
}

impl Handle {
    /// A [`Producer`] of `partition`: appends stored in call order.
    pub fn producer(&self, partition: u64) -> Producer {
        Producer {
            handle: self.clone(),
            partition,
        }
    }
}

impl Producer {
    /// The partition appended to.
    pub fn partition(&self) -> u64 {
        self.partition
    }

    /// Admits `batch` (as [`Handle::append`] does) and resolves once it is
    /// in its shard's queue, after every batch this producer sent before
    /// it; the `Reply` it gives resolves once the batch is stored. An
    /// admission error, or a shard that stopped, is in the `Reply`.
    pub async fn send(&mut self, batch: impl Into<Bytes>) -> Reply<AppendAck> {
        let mut reply = self.handle.append(self.partition, batch);
        std::future::poll_fn(|cx| reply.poll_sent(cx)).await;
        reply
    }

    /// [`Producer::send`] for an already admitted batch.
    pub async fn send_admitted(&mut self, batch: Batch) -> Reply<AppendAck> {
        let mut reply = self.handle.append_admitted(self.partition, batch);
        std::future::poll_fn(|cx| reply.poll_sent(cx)).await;
        reply
    }

    /// [`Producer::send`] from a plain thread: blocks while the shard's
    /// queue is full. On a shard's thread, where waiting would stall the
    /// shard, the `Reply` is [`RequestError::WouldBlockShard`].
    pub fn send_blocking(&mut self, batch: impl Into<Bytes>) -> Reply<AppendAck> {
        if crate::thread::on_shard_thread() {
            return Reply::failed(RequestError::WouldBlockShard);
        }
        pollster::block_on(self.send(batch))
    }

    /// Queues `batch` only if its shard's queue has room, else hands it
    /// back ([`Full`]): back-pressure without waiting. A batch handed back
    /// was not queued: to keep call order, send it again before the next.
    pub fn try_send(&mut self, batch: Batch) -> Result<Reply<AppendAck>, Full> {
        self.handle.try_append(self.partition, batch)
    }
}
