//! How a shard's data syncs meet the ring, for
//! [`LogConfig::syncs`](super::LogConfig::syncs): side by side (no gate)
//! or one at a time per thread (shard), through this gate.

use super::config::SyncIssue;
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

/// Waits for this thread's turn to sync under `issue`; `None` when syncs
/// go side by side.
pub(super) async fn turn(issue: SyncIssue) -> Option<Turn> {
    match issue {
        SyncIssue::Together => None,
        SyncIssue::OneAtATime => Some(TurnWait.await),
    }
}

struct TurnWait;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn one_at_a_time_waits_for_the_turn_together_never_waits() {
        let first = std::pin::pin!(turn(SyncIssue::OneAtATime));
        let Poll::Ready(Some(held)) = poll(first) else {
            panic!("the first sync waits for nobody");
        };
        let mut second = std::pin::pin!(turn(SyncIssue::OneAtATime));
        assert!(poll(second.as_mut()).is_pending(), "a turn is held");
        let together = std::pin::pin!(turn(SyncIssue::Together));
        assert!(matches!(poll(together), Poll::Ready(None)));
        drop(held);
        assert!(matches!(poll(second), Poll::Ready(Some(_))));
    }
}
