//! A suffix cut on a shard: the partition's log is closed and reopened
//! by the cut (`PartitionLog::cut_suffix`), so requests that arrive
//! meanwhile wait, as they do while a partition opens, and go to the cut
//! log.

use super::Shard;
use crate::error::RequestError;
use crate::partitions::{Log, Slot};
use crate::request::Request;
use std::rc::Rc;

impl Shard {
    pub(super) fn cut_suffix(self: &Rc<Self>, log: &Log, req: Request) {
        let Request::CutSuffix { from, reply, .. } = req else {
            unreachable!("cut_suffix is called with CutSuffix requests only");
        };
        let p = log.partition();
        let log = log.clone();
        self.partitions
            .borrow_mut()
            .insert(p, Slot::Closing(Vec::new()));
        let shard = self.clone();
        self.spawn_tracked(async move {
            let result = log.cut_suffix(from).await;
            let pending = match shard.partitions.borrow_mut().remove(&p) {
                Some(Slot::Closing(v)) => v,
                _ => Vec::new(),
            };
            let (next, answer) = match result {
                Ok(None) => (Some(log), Ok(None)),
                Ok(Some((cut, report))) => {
                    tracing::info!("partition {p}: suffix cut: {report}");
                    if let Some(r) = shard.retention.borrow().get(&p) {
                        cut.set_retention(*r);
                    }
                    (Some(cut), Ok(Some(report)))
                }
                // A refusal, or a failure before the close: still open.
                Err(e) if !log.is_closed() => (Some(log), Err(RequestError::from(e))),
                // Closed with the cut recorded: the next open finishes it.
                Err(e) => (None, Err(RequestError::from(e))),
            };
            let _ = reply.send(answer);
            match next {
                Some(log) => {
                    shard
                        .partitions
                        .borrow_mut()
                        .insert(p, Slot::Open(log.clone()));
                    shard.lru.borrow_mut().touch(p);
                    for req in pending {
                        shard.dispatch(&log, req);
                    }
                }
                None => {
                    shard.lru.borrow_mut().forget(p);
                    shard.closed_partition(p, pending);
                }
            }
        });
    }
}
