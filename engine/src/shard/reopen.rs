//! Reopening a partition in place (`Handle::reopen_partition`): its log
//! is closed (a poisoned log's close fails, which is only logged: what it
//! could not sync is what recovery rewrites) and opened again, which
//! recovers it from what is on disk, as an engine's open does, and clears
//! a poison or an unopenable state. Requests that arrive meanwhile wait
//! for the reopened log, as they do while a partition opens.

use super::Shard;
use crate::error::RequestError;
use crate::partitions::{Log, Slot};
use crate::request::Request;
use std::rc::Rc;

impl Shard {
    /// Reopens partition `p`, whose open log is `log` (none when it rests
    /// on disk or could not be opened).
    pub(super) fn reopen(self: &Rc<Self>, p: u64, log: Option<Log>, req: Request) {
        let Request::Reopen { reply, .. } = req else {
            unreachable!("reopen is called with Reopen requests only");
        };
        if self.config.commit_gate {
            // Its owner (a Raft group) sets the commit mark, which an open
            // resets: reopened behind its back, it would serve nothing.
            let _ = reply.send(Err(RequestError::Replicated { partition: p }));
            return;
        }
        self.partitions
            .borrow_mut()
            .insert(p, Slot::Closing(Vec::new()));
        self.lru.borrow_mut().forget(p);
        let shard = self.clone();
        self.spawn_tracked(async move {
            if let Some(log) = log {
                if let Err(e) = log.close().await {
                    tracing::warn!("partition {p}: closing it to reopen: {e}");
                }
            }
            let pending = match shard.partitions.borrow_mut().remove(&p) {
                Some(Slot::Closing(v)) => v,
                _ => Vec::new(),
            };
            shard
                .partitions
                .borrow_mut()
                .insert(p, Slot::Opening(pending));
            shard.open_partition_answering(p, Some(reply));
        });
    }
}
