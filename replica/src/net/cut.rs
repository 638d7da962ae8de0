//! For tests: links between nodes cut while they run (a network
//! partition), so a test can isolate a leader without stopping it.
//!
//! A cut drops the Raft messages either node queues for the other, as a
//! lost link would (raft-rs resends once it heals); connections stay up.
//! Links are named by the nodes' replica addresses, unique to a test's
//! cluster, so the tests that run at once in one process cut only their
//! own.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The links cut, each once per guard.
static CUT: Mutex<Vec<(SocketAddr, SocketAddr)>> = Mutex::new(Vec::new());
/// How many guards live: while none does, a send checks nothing else.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Cuts the link between the nodes at `a` and `b` (their replica
/// addresses), both ways, until the guard is dropped.
#[must_use = "the link heals when this is dropped"]
pub fn cut_link(a: SocketAddr, b: SocketAddr) -> Cut {
    let mut cut = CUT.lock().unwrap_or_else(|e| e.into_inner());
    cut.push((a, b));
    LIVE.fetch_add(1, Ordering::SeqCst);
    Cut(a, b)
}

/// Keeps a link cut while it lives.
#[derive(Debug)]
pub struct Cut(SocketAddr, SocketAddr);

impl Drop for Cut {
    fn drop(&mut self) {
        let mut cut = CUT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = cut.iter().position(|l| *l == (self.0, self.1)) {
            cut.remove(i);
        }
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a message from the node at `from` to the one at `to` is lost.
pub(super) fn is_cut(from: SocketAddr, to: SocketAddr) -> bool {
    if LIVE.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let cut = CUT.lock().unwrap_or_else(|e| e.into_inner());
    cut.iter()
        .any(|&(a, b)| (a, b) == (from, to) || (b, a) == (from, to))
}
