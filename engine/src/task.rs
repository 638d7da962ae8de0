//! Small futures a shard runs its work with.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A caller's task whose panics are caught and logged (see
/// `Shard::spawn_task`).
pub(crate) struct Contained {
    pub(crate) fut: Option<Pin<Box<dyn Future<Output = ()>>>>,
    pub(crate) shard: usize,
}

impl Future for Contained {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(());
        };
        let done = match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(())) => Ok(()),
            Err(_) => Err(()),
        };
        // Drop the task here, where a panic in its destructor is caught too.
        let fut = self.fut.take();
        let dropped = std::panic::catch_unwind(AssertUnwindSafe(move || drop(fut)));
        if done.is_err() || dropped.is_err() {
            tracing::error!(
                "shard {}: a task spawned on it panicked; it was dropped",
                self.shard
            );
        }
        Poll::Ready(())
    }
}

/// Yields once to the runtime's other tasks.
pub(crate) struct YieldNow(pub(crate) bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
