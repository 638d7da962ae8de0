//! One data sync at a time per thread (shard), for
//! [`LogConfig::serial_syncs`](super::LogConfig::serial_syncs): the
//! baseline that measures what sending a shard's syncs to the ring side by
//! side buys.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Gate {
    busy: bool,
    waiting: Vec<Waker>,
}

thread_local! {
    static GATE: RefCell<Gate> = RefCell::new(Gate::default());
}

/// The turn to sync, held until dropped.
pub(super) struct Turn(());

impl Drop for Turn {
    fn drop(&mut self) {
        let waiting = GATE.with(|g| {
            let mut g = g.borrow_mut();
            g.busy = false;
            std::mem::take(&mut g.waiting)
        });
        // All of them: one may have been dropped while waiting.
        for w in waiting {
            w.wake();
        }
    }
}

/// Waits for this thread's turn to sync.
pub(super) fn turn() -> TurnWait {
    TurnWait(())
}

pub(super) struct TurnWait(());

impl Future for TurnWait {
    type Output = Turn;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Turn> {
        GATE.with(|g| {
            let mut g = g.borrow_mut();
            if g.busy {
                g.waiting.push(cx.waker().clone());
                Poll::Pending
            } else {
                g.busy = true;
                Poll::Ready(Turn(()))
            }
        })
    }
}
