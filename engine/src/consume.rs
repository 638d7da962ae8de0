//! Consumption that waits: [`Consumer`], a stream of polls of one
//! partition from an exact offset, each a long poll on the shard.

use crate::engine::Handle;
use crate::error::RequestError;
use crate::queue::Reply;
use corelog_segment::log::{PollFrom, PollReply};
use futures_core::Stream;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The polls of one partition, in order, from an exact offset: a
/// [`Stream`] of [`PollReply`]s that waits, on the partition's shard, for
/// data past what it has given (see [`Handle::poll_wait`]), so a caught-up
/// consumer neither spins nor sleeps. Made by [`Handle::consume`].
///
/// - Each reply is whole stored batches, zero-copy; its
///   [`messages`](PollReply::messages) start exactly where the one before
///   ended (the first at the offset asked for), so no message is given
///   twice or skipped.
/// - A gap (offsets deleted by retention before they were read) shows as a
///   reply whose [`start_offset`](PollReply::start_offset) is past the
///   previous [`next_offset`](PollReply::next_offset).
/// - An error (the partition deleted, the engine shutting down, a damaged
///   segment) is yielded once and ends the stream; [`Consumer::next_offset`]
///   says where a new one would continue.
/// - Dropping the stream, or a pending `next`, leaves nothing behind on
///   the shard but the wait already asked for, which ends at its deadline
///   or at the next append.
pub struct Consumer {
    handle: Handle,
    partition: u64,
    next: u64,
    max_bytes: u64,
    max_wait: Duration,
    pending: Option<Reply<PollReply>>,
    ended: bool,
    yield_empty: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("partition", &self.partition)
            .field("next_offset", &self.next)
            .field("max_bytes", &self.max_bytes)
            .field("ended", &self.ended)
            .finish()
    }
}

impl Handle {
    /// A [`Consumer`] of `partition` from `from_offset` on, each reply up
    /// to `max_bytes` (at least one batch).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use corelog::{BatchBuilder, Config, Engine, MessageSpec};
    /// let engine = Engine::open(Config::new(dir.path()))?;
    /// let h = engine.handle();
    /// let mut b = BatchBuilder::new();
    /// for id in 0..4 {
    ///     b.push(MessageSpec { id, timestamp: 1, payload: b"m", user_headers: b"" });
    /// }
    /// h.append(1, b.build()?).wait()?;
    /// // From offset 2, inside the stored batch of 0..=3.
    /// let mut consumer = h.consume(1, 2, 1 << 20);
    /// let reply = consumer.next_blocking().expect("a reply")?;
    /// let offsets: Vec<u64> = reply.messages().map(|m| m.offset()).collect();
    /// assert_eq!(offsets, [2, 3]);
    /// assert_eq!(consumer.next_offset(), 4);
    /// engine.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn consume(&self, partition: u64, from_offset: u64, max_bytes: u64) -> Consumer {
        Consumer {
            handle: self.clone(),
            partition,
            next: from_offset,
            max_bytes,
            max_wait: Consumer::DEFAULT_MAX_WAIT,
            pending: None,
            ended: false,
            yield_empty: false,
        }
    }
}

impl Consumer {
    /// How long one of a consumer's polls waits on the shard before it is
    /// asked again, unless set with [`Consumer::max_wait`].
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(10);

    /// How long each poll waits on the shard for data before it is asked
    /// again (it answers as soon as data lands, whatever this is).
    pub fn max_wait(mut self, max_wait: Duration) -> Consumer {
        self.max_wait = max_wait;
        self
    }

    /// Also yields an empty reply each time `max_wait` passes with nothing
    /// new (Kafka's empty fetch), so a loop over the stream gets control
    /// back to check its own stop conditions. Off by default: the stream
    /// then yields only replies with messages.
    pub fn yield_empty(mut self) -> Consumer {
        self.yield_empty = true;
        self
    }

    /// The partition consumed.
    pub fn partition(&self) -> u64 {
        self.partition
    }

    /// The offset the next reply's messages start at (or, after a gap,
    /// the first retained offset past it).
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// The next reply, blocking the calling thread until there is one:
    /// `None` once the stream has ended. Refused on a shard's thread
    /// ([`RequestError::WouldBlockShard`]), as [`Reply::wait`] is.
    pub fn next_blocking(&mut self) -> Option<Result<PollReply, RequestError>> {
        if crate::thread::on_shard_thread() {
            return Some(Err(RequestError::WouldBlockShard));
        }
        pollster::block_on(std::future::poll_fn(|cx| {
            Pin::new(&mut *self).poll_next(cx)
        }))
    }
}

impl Stream for Consumer {
    type Item = Result<PollReply, RequestError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            let (handle, partition, next) = (&this.handle, this.partition, this.next);
            let (max_bytes, max_wait) = (this.max_bytes, this.max_wait);
            let reply = this.pending.get_or_insert_with(|| {
                handle.poll_wait(partition, PollFrom::Offset(next), max_bytes, max_wait)
            });
            let answer = match Pin::new(reply).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(answer) => answer,
            };
            this.pending = None;
            match answer {
                // Nothing new within max_wait: wait again, or say so.
                Ok(r) if r.is_empty() || r.next_offset() <= this.next => {
                    if this.yield_empty {
                        return Poll::Ready(Some(Ok(r.starting_at(this.next))));
                    }
                    continue;
                }
                Ok(r) => {
                    let r = r.starting_at(this.next);
                    this.next = r.next_offset();
                    return Poll::Ready(Some(Ok(r)));
                }
                Err(e) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}
