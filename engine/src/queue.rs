//! The bounded request queue into a shard, and the replies coming back.
//!
//! Callers on any thread push requests into a lock-free bounded queue
//! (crossbeam's `ArrayQueue`) and wake the shard's runtime through an
//! `AtomicWaker` (monoio's `sync` feature makes its wakers work from other
//! threads). A full queue is back-pressure: the caller's future waits for
//! space on an `event_listener::Event` the shard notifies as it drains.
//! The reply travels back on a oneshot channel, so the futures run on any
//! executor.

use crate::error::RequestError;
use crate::request::Request;
use crate::thread;
use atomic_waker::AtomicWaker;
use crossbeam_queue::ArrayQueue;
use event_listener::{Event, EventListener};
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

pub(crate) struct ShardQueue {
    pub(crate) index: usize,
    queue: ArrayQueue<Request>,
    shard_waker: AtomicWaker,
    space: Event,
    closed: AtomicBool,
    /// The shard panicked: its callers get `ShardFailed`.
    failed: AtomicBool,
    /// What the shard counts for [`crate::Handle::metrics`].
    pub(crate) counters: crate::metrics::ShardCounters,
}

impl ShardQueue {
    pub(crate) fn new(index: usize, depth: usize) -> ShardQueue {
        ShardQueue {
            index,
            queue: ArrayQueue::new(depth.max(1)),
            shard_waker: AtomicWaker::new(),
            space: Event::new(),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            counters: crate::metrics::ShardCounters::new(),
        }
    }

    /// Pushes and wakes the shard; gives the request back when full.
    pub(crate) fn try_push(&self, req: Request) -> Result<(), Request> {
        self.queue.push(req)?;
        self.shard_waker.wake();
        if self.closed.load(Ordering::SeqCst) {
            // The shard stopped and may have drained before our push: drop
            // what is left so every reply channel closes.
            self.drain();
        }
        Ok(())
    }

    pub(crate) fn pop(&self) -> Option<Request> {
        self.queue.pop()
    }

    /// Tells callers waiting for space that `n` slots were freed.
    pub(crate) fn freed(&self, n: usize) {
        if n > 0 {
            self.space.notify(n);
        }
    }

    /// The shard stops taking requests: anything queued is dropped (its
    /// callers get an error), waiting callers are woken.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.drain();
        self.space.notify(usize::MAX);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The shard's health as its queue knows it.
    pub(crate) fn health(&self) -> crate::health::ShardHealth {
        use crate::health::ShardState;
        let state = if self.failed.load(Ordering::SeqCst) {
            ShardState::Failed
        } else if self.is_closed() {
            ShardState::Stopped
        } else {
            ShardState::Running
        };
        crate::health::ShardHealth {
            shard: self.index,
            state,
            queued: self.queue.len(),
            capacity: self.queue.capacity(),
        }
    }

    /// The shard died (a panic in its own work): the queue closes, and
    /// every caller, waiting or to come, gets `ShardFailed`.
    pub(crate) fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
        self.close();
    }

    /// What a caller whose request this queue will not answer gets.
    fn refusal(&self) -> RequestError {
        if self.failed.load(Ordering::SeqCst) {
            RequestError::ShardFailed { shard: self.index }
        } else if self.is_closed() {
            RequestError::ShuttingDown
        } else {
            RequestError::QueueClosed { shard: self.index }
        }
    }

    fn drain(&self) {
        while self.queue.pop().is_some() {}
    }

    /// Resolves when the queue may hold a request (the shard re-checks).
    pub(crate) fn ready(&self) -> QueueReady<'_> {
        QueueReady { q: self }
    }
}

impl std::fmt::Debug for ShardQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardQueue")
            .field("index", &self.index)
            .finish()
    }
}

pub(crate) struct QueueReady<'a> {
    q: &'a ShardQueue,
}

impl Future for QueueReady<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.q.queue.is_empty() {
            return Poll::Ready(());
        }
        self.q.shard_waker.register(cx.waker());
        // A push between the check and the registration would have found
        // no waker: check again.
        if !self.q.queue.is_empty() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// The answer to a request, on any executor: `.await` it, or [`Reply::wait`]
/// from a plain thread.
///
/// **What dropping a `Reply` does** (one rule for every request): its
/// answer is discarded, and the request is carried out if it was *sent*
/// and withdrawn, nothing of it done, if it was not. A request is sent
/// when the call that made the `Reply` returns, unless its shard's queue
/// was full; then it is parked inside the `Reply`, sent when the `Reply` is
/// polled and the queue has room ([`Reply::is_sent`] tells which). So an
/// append whose `Reply` is dropped unpolled is stored if the queue had
/// room, and not stored if it was full. To never park: [`crate::Handle::try_append`];
/// to keep call order through a full queue: [`crate::Producer`]. A reply
/// that combines every shard's (`flush_all`, `partitions`,
/// `enforce_retention`) sends each shard's part by the same rule.
#[must_use = "a reply does nothing unless awaited (the request itself is already queued when there was room)"]
pub struct Reply<T> {
    state: State<T>,
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self.state {
            State::Failed(_) => "failed",
            State::Queued { .. } => "waiting for queue space",
            State::Waiting { .. } => "queued",
            State::Joined(_) => "combining replies",
            State::Done => "done",
        };
        f.debug_struct("Reply").field("state", &s).finish()
    }
}

enum State<T> {
    Failed(Option<RequestError>),
    Queued {
        queue: Arc<ShardQueue>,
        req: Option<Request>,
        listener: Option<EventListener>,
        rx: oneshot::Receiver<Result<T, RequestError>>,
    },
    Waiting {
        rx: oneshot::Receiver<Result<T, RequestError>>,
        queue: Arc<ShardQueue>,
    },
    /// Replies combined (from several shards), or a reply checked further,
    /// on the caller's side.
    Joined(Pin<Box<dyn Future<Output = Result<T, RequestError>> + Send>>),
    Done,
}

impl<T> Reply<T> {
    pub(crate) fn failed(e: RequestError) -> Reply<T> {
        Reply {
            state: State::Failed(Some(e)),
        }
    }

    /// A request already handed to its shard.
    pub(crate) fn waiting(
        rx: oneshot::Receiver<Result<T, RequestError>>,
        queue: Arc<ShardQueue>,
    ) -> Reply<T> {
        Reply {
            state: State::Waiting { rx, queue },
        }
    }

    /// A reply computed from other replies (already sent) by `combine`.
    pub(crate) fn joined(
        combine: impl Future<Output = Result<T, RequestError>> + Send + 'static,
    ) -> Reply<T> {
        Reply {
            state: State::Joined(Box::pin(combine)),
        }
    }

    /// Queues `req` now if there is room, else when polled.
    pub(crate) fn send(
        queue: &Arc<ShardQueue>,
        req: Request,
        rx: oneshot::Receiver<Result<T, RequestError>>,
    ) -> Reply<T> {
        match queue.try_push(req) {
            Ok(()) => Reply::waiting(rx, queue.clone()),
            Err(req) => Reply {
                state: State::Queued {
                    queue: queue.clone(),
                    req: Some(req),
                    listener: None,
                    rx,
                },
            },
        }
    }

    /// Blocks the calling thread until the reply arrives. Refuses to run on
    /// a shard thread, where it would stall the shard.
    pub fn wait(self) -> Result<T, RequestError> {
        if thread::on_shard_thread() {
            return Err(RequestError::WouldBlockShard);
        }
        pollster::block_on(self)
    }

    /// Blocks the calling thread until the request is in its shard's queue
    /// (or has failed), without waiting for its answer: how a plain thread
    /// that issues requests one after another keeps their order through a
    /// full queue (each is queued before the next is made). Refuses to run
    /// on a shard thread, where it would stall the shard: the reply then
    /// stays as it was.
    pub fn wait_sent(&mut self) -> Result<(), RequestError> {
        if self.is_sent() {
            return Ok(());
        }
        if thread::on_shard_thread() {
            return Err(RequestError::WouldBlockShard);
        }
        pollster::block_on(std::future::poll_fn(|cx| self.poll_sent(cx)));
        Ok(())
    }
}

impl<T> Reply<T> {
    /// Whether the request has been handed to its shard (or has failed):
    /// false only while it is parked, waiting for room in a full queue.
    /// This is what dropping the `Reply` decides: see [`Reply`].
    pub fn is_sent(&self) -> bool {
        !matches!(self.state, State::Queued { .. })
    }

    /// Ready once the request is in its shard's queue (or has failed),
    /// without waiting for its answer: pushes a parked request when there
    /// is room, and waits for room otherwise.
    pub(crate) fn poll_sent(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.is_sent() {
                return Poll::Ready(());
            }
            let State::Queued {
                queue,
                req,
                mut listener,
                rx,
            } = std::mem::replace(&mut self.state, State::Done)
            else {
                return Poll::Ready(());
            };
            let Some(r) = req.filter(|_| !queue.is_closed()) else {
                self.state = State::Failed(Some(queue.refusal()));
                return Poll::Ready(());
            };
            match queue.try_push(r) {
                Ok(()) => {
                    self.state = State::Waiting { rx, queue };
                    return Poll::Ready(());
                }
                Err(r) => {
                    let pending = match &mut listener {
                        None => {
                            // Listen, then try again: space may have been
                            // freed before we listened.
                            listener = Some(queue.space.listen());
                            false
                        }
                        Some(l) => match Pin::new(l).poll(cx) {
                            Poll::Ready(()) => {
                                listener = None;
                                false
                            }
                            Poll::Pending => true,
                        },
                    };
                    self.state = State::Queued {
                        queue,
                        req: Some(r),
                        listener,
                        rx,
                    };
                    if pending {
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

impl<T> Unpin for Reply<T> {}

impl<T> Future for Reply<T> {
    type Output = Result<T, RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.state {
                State::Failed(e) => {
                    let e = e.take().unwrap_or(RequestError::ShuttingDown);
                    self.state = State::Done;
                    return Poll::Ready(Err(e));
                }
                State::Queued { .. } => {
                    if self.poll_sent(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                State::Waiting { rx, queue } => {
                    return match Pin::new(rx).poll(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(r) => {
                            let r = r.unwrap_or_else(|_| Err(queue.refusal()));
                            self.state = State::Done;
                            Poll::Ready(r)
                        }
                    };
                }
                State::Joined(combine) => {
                    let Poll::Ready(r) = combine.as_mut().poll(cx) else {
                        return Poll::Pending;
                    };
                    self.state = State::Done;
                    return Poll::Ready(r);
                }
                State::Done => return Poll::Ready(Err(RequestError::ShuttingDown)),
            }
        }
    }
}
