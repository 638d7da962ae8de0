//! Back-pressure the caller chooses: [`Handle::try_append`] queues a batch
//! only when its shard's queue has room, and hands it back otherwise.

use super::Handle;
use crate::error::RequestError;
use crate::queue::Reply;
use crate::request::Request;
use crate::shard;
use corelog_segment::log::AppendAck;
use corelog_segment::Batch;
use futures_channel::oneshot;
use std::sync::atomic::Ordering;

/// A batch [`Handle::try_append`] could not queue (the shard's queue was
/// full), handed back to its caller.
#[derive(Debug)]
pub struct Full(pub Batch);

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the shard's queue is full: a batch of {} bytes was handed back",
            self.0.len()
        )
    }
}

impl std::error::Error for Full {}

impl Handle {
    /// Like [`Handle::append_admitted`], without waiting for room in the
    /// shard's queue: when it is full the batch is handed back
    /// ([`Full`]), so the caller applies back-pressure its own way (slow
    /// its producer, retry later, shed load) instead of parking the
    /// request inside its [`Reply`]. A queued batch is stored in the order
    /// it reached the queue; an [`append`](Handle::append) parked for room
    /// is queued when its `Reply` is polled, so a `try_append` may pass it.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), corelog::Error> {
    /// # let engine = corelog::Engine::open(corelog::Config::new("/var/lib/mybroker"))?;
    /// # let h = engine.handle();
    /// # let bytes: Vec<u8> = Vec::new();
    /// let batch = corelog::Batch::admit(bytes, &corelog::Limits::default())?;
    /// match h.try_append(7, batch) {
    ///     Ok(reply) => println!("stored at {}", reply.wait()?.base_offset),
    ///     Err(corelog::Full(batch)) => { /* the shard is saturated: keep `batch`, try later */ }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_append(&self, partition: u64, batch: Batch) -> Result<Reply<AppendAck>, Full> {
        let declared = batch.len() as u64;
        if declared > self.shared.limits.max_batch_bytes {
            return Ok(Reply::failed(RequestError::Admission {
                partition,
                error: corelog_segment::BatchError::TooLarge {
                    declared,
                    max: self.shared.limits.max_batch_bytes,
                },
            }));
        }
        if self.shared.closing.load(Ordering::SeqCst) {
            return Ok(Reply::failed(RequestError::ShuttingDown));
        }
        let shard = self.shard_of(partition);
        let Some(queue) = self.shared.queues.get(shard) else {
            return Ok(Reply::failed(RequestError::NoSuchShard {
                shard,
                shards: self.shards(),
            }));
        };
        let (tx, rx) = oneshot::channel();
        let req = Request::Append {
            partition,
            batch,
            stamped: false,
            reply: tx,
        };
        if let Some(local) = shard::local(self.shared.id, shard) {
            local.handle(req);
            return Ok(Reply::waiting(rx, queue.clone()));
        }
        match queue.try_push(req) {
            Ok(()) => Ok(Reply::waiting(rx, queue.clone())),
            Err(Request::Append { batch, .. }) => Err(Full(batch)),
            Err(other) => {
                // Only the append above is pushed here.
                other.fail(RequestError::ShuttingDown);
                Ok(Reply::failed(RequestError::ShuttingDown))
            }
        }
    }
}
