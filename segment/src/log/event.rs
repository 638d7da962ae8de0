//! A one-shot, single-threaded event: tasks wait until it is set.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
pub(crate) struct Event {
    set: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl Event {
    pub(crate) fn is_set(&self) -> bool {
        self.set.get()
    }

    pub(crate) fn set(&self) {
        self.set.set(true);
        for w in self.waiters.take() {
            w.wake();
        }
    }

    pub(crate) fn wait(self: &Rc<Self>) -> Wait {
        Wait {
            event: self.clone(),
        }
    }
}

pub(crate) struct Wait {
    event: Rc<Event>,
}

impl Future for Wait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.event.set.get() {
            return Poll::Ready(());
        }
        self.event.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}
