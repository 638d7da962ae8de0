//! Waiting for the visible end to move: what a long poll sleeps on.
//!
//! The log keeps a generation that every move of the visible end (a write
//! or sync that made batches visible, the commit mark moving), a close and
//! an interruption advance, and the wakers of the readers waiting on it. A
//! waiter registers once and is removed when it is woken or dropped, so
//! readers that gave up (a timeout) leave nothing behind, and the append
//! path pays one increment while nobody waits.

use super::partition::PartitionLog;
use crate::io::Storage;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

impl<S: Storage> PartitionLog<S> {
    /// Resolves once the visible end may have moved since the call: more
    /// batches became visible (appends acknowledged, the commit mark
    /// moved), or the log was closed, or [`PartitionLog::interrupt_waiters`]
    /// was called. It may resolve with nothing new to read: poll again to
    /// see. Dropping it unregisters it.
    pub fn visible_changed(&self) -> VisibleChanged<S> {
        let generation = self.inner.st.borrow().waiters.generation;
        VisibleChanged {
            log: self.clone(),
            generation,
            id: None,
        }
    }

    /// Wakes every [`PartitionLog::visible_changed`] waiter now (an engine
    /// stopping ends its long polls this way).
    pub fn interrupt_waiters(&self) {
        self.inner.st.borrow_mut().waiters.moved();
    }
}

/// See [`PartitionLog::visible_changed`].
#[must_use = "a future does nothing unless awaited"]
pub struct VisibleChanged<S: Storage> {
    log: PartitionLog<S>,
    generation: u64,
    id: Option<u64>,
}

impl<S: Storage> std::fmt::Debug for VisibleChanged<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VisibleChanged")
            .field("log", &self.log)
            .field("generation", &self.generation)
            .finish()
    }
}

impl<S: Storage> Future for VisibleChanged<S> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut st = this.log.inner.st.borrow_mut();
        if st.waiters.generation != this.generation || st.closed {
            if let Some(id) = this.id.take() {
                st.waiters.wakers.remove(&id);
            }
            return Poll::Ready(());
        }
        let w = &mut st.waiters;
        let id = *this.id.get_or_insert_with(|| {
            w.next_id += 1;
            w.next_id
        });
        w.wakers.insert(id, cx.waker().clone());
        Poll::Pending
    }
}

impl<S: Storage> Drop for VisibleChanged<S> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            if let Ok(mut st) = self.log.inner.st.try_borrow_mut() {
                st.waiters.wakers.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use crate::log::LogConfig;

    fn waiting<S: Storage>(log: &PartitionLog<S>) -> usize {
        log.inner.st.borrow().waiters.wakers.len()
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_behind_and_a_move_wakes_the_rest() {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let config = LogConfig::default();
            let disk = SimStorage::new(1, config.segment_capacity() as usize);
            let (log, _) = PartitionLog::open(disk, "/p", 1, config)
                .await
                .expect("open");
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let mut gone = log.visible_changed();
            let mut kept = log.visible_changed();
            assert!(Pin::new(&mut gone).poll(&mut cx).is_pending());
            assert!(Pin::new(&mut kept).poll(&mut cx).is_pending());
            // Polled again: still one registration each.
            assert!(Pin::new(&mut kept).poll(&mut cx).is_pending());
            assert_eq!(waiting(&log), 2);
            drop(gone);
            assert_eq!(waiting(&log), 1, "a dropped waiter unregisters");
            log.interrupt_waiters();
            assert_eq!(waiting(&log), 0);
            assert!(Pin::new(&mut kept).poll(&mut cx).is_ready());
            // A waiter made after the move waits for the next one.
            let mut next = log.visible_changed();
            assert!(Pin::new(&mut next).poll(&mut cx).is_pending());
            log.close().await.expect("close");
            assert!(
                Pin::new(&mut next).poll(&mut cx).is_ready(),
                "a close ends the wait"
            );
        });
    }
}
