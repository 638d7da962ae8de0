//! Polls: a partition's stored batches, from its local log or, below the
//! local start with a tier, from the object store.

use super::{offload, Handle};
use crate::queue::Reply;
use crate::request::Request;
use corelog_segment::log::{PollFrom, PollReply};
use std::time::{Duration, Instant};

impl Handle {
    /// Whole stored batches from `from`, up to `max_bytes` (at least one),
    /// as zero-copy ranges of the mapped segment files.
    /// With a tier (`Config::tier`), batches below the partition's local
    /// start are served from the object store, verified, the same way.
    pub fn poll(&self, partition: u64, from: PollFrom, max_bytes: u64) -> Reply<PollReply> {
        let local = self.send(self.shard_of(partition), |reply| Request::Poll {
            partition,
            from,
            max_bytes,
            reply,
        });
        match &self.shared.tier {
            Some(t) => offload::below_local(t.clone(), partition, from, max_bytes, local),
            None => local,
        }
    }

    /// Like [`Handle::poll`], but when there is nothing at `from` yet it
    /// waits, up to `max_wait`, for batches to become visible there (an
    /// append acknowledged, a replica's commit mark moved), and answers
    /// as soon as they do: a consumer that has caught up waits here
    /// instead of polling in a loop (Kafka's fetch `max_wait`). Empty at
    /// `max_wait`; [`RequestError::ShuttingDown`](crate::RequestError::ShuttingDown) at once when the engine
    /// shuts down meanwhile. The shard
    /// wakes the waiters of a partition when its visible end moves; while
    /// nobody waits, appends pay nothing for it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use corelog::{BatchBuilder, Config, Engine, MessageSpec, PollFrom};
    /// use std::time::Duration;
    /// let engine = Engine::open(Config::new(dir.path()))?;
    /// let h = engine.handle();
    /// h.create_partition(1).wait()?;
    /// // Nothing there yet: empty after the wait.
    /// let reply = h.poll_wait(1, PollFrom::Offset(0), 1 << 20, Duration::from_millis(10)).wait()?;
    /// assert!(reply.is_empty());
    /// // A waiting poll answers once an append lands.
    /// let waiting = h.poll_wait(1, PollFrom::Offset(0), 1 << 20, Duration::from_secs(30));
    /// let mut b = BatchBuilder::new();
    /// b.push(MessageSpec { id: 1, timestamp: 1, payload: b"hello", user_headers: b"" });
    /// h.append(1, b.build()?).wait()?;
    /// assert_eq!(waiting.wait()?.batch_count(), 1);
    /// engine.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poll_wait(
        &self,
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
        max_wait: Duration,
    ) -> Reply<PollReply> {
        let now = Instant::now();
        let deadline = now
            .checked_add(max_wait)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        let local = self.send(self.shard_of(partition), |reply| Request::PollWait {
            partition,
            from,
            max_bytes,
            deadline,
            reply,
        });
        match &self.shared.tier {
            Some(t) => offload::below_local(t.clone(), partition, from, max_bytes, local),
            None => local,
        }
    }

    /// Like [`Handle::poll`], then verifies every batch of the reply
    /// (layout, checksums, offsets) on the calling thread: a corrupt batch
    /// is an error naming its file and position, never returned.
    pub fn poll_verified(
        &self,
        partition: u64,
        from: PollFrom,
        max_bytes: u64,
    ) -> Reply<PollReply> {
        let reply = self.poll(partition, from, max_bytes);
        let limits = self.shared.limits;
        Reply::joined(async move {
            let r = reply.await?;
            r.verify(&limits)?;
            Ok(r)
        })
    }

    /// Polls for `consumer`: after its stored offset, or from the start.
    pub fn poll_next(&self, partition: u64, consumer: u64, max_bytes: u64) -> Reply<PollReply> {
        if self.shared.tier.is_some() {
            // Its offset may lie below the local log: a poll from there.
            let (h, stored) = (self.clone(), self.load_offset(partition, consumer));
            return Reply::joined(async move {
                let from = match stored.await? {
                    Some(o) => PollFrom::Offset(o.saturating_add(1)),
                    None => PollFrom::First,
                };
                h.poll(partition, from, max_bytes).await
            });
        }
        self.send(self.shard_of(partition), |reply| Request::PollNext {
            partition,
            consumer,
            max_bytes,
            reply,
        })
    }
}
