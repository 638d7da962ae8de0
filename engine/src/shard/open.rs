//! Opening a partition: its options file first (a waiting create's
//! options written, then read back), then its log, then the requests that
//! waited for it.

use super::{Shard, Slot};
use crate::error::RequestError;
use crate::request::Request;
use corelog_segment::io::UringStorage;
use corelog_segment::log::{OpenError as LogOpenError, PartitionLog, RecoveryReport, Retention};
use std::rc::Rc;

type Opened = Result<(PartitionLog<UringStorage>, RecoveryReport), LogOpenError>;

impl Shard {
    pub(super) fn open_partition(self: &Rc<Self>, p: u64) {
        self.open_partition_answering(p, None);
    }

    /// Opens partition `p` (its slot `Opening`), then serves the requests
    /// that waited; `reopened`, a reopen's reply, gets the recovery's report.
    pub(super) fn open_partition_answering(
        self: &Rc<Self>,
        p: u64,
        reopened: Option<crate::request::Respond<RecoveryReport>>,
    ) {
        let shard = self.clone();
        self.spawn_tracked(async move {
            let (result, retention) = shard.open_with_options(p).await;
            match &result {
                Ok((_, report)) if report.changed_data() => {
                    tracing::warn!("partition {p} recovered: {report}");
                }
                Ok(_) => {}
                Err(e) => tracing::error!("partition {p} cannot be opened: {e}"),
            }
            let (slot, pending) = {
                let mut parts = shard.partitions.borrow_mut();
                let pending = match parts.remove(&p) {
                    Some(Slot::Opening(v)) => v,
                    _ => Vec::new(),
                };
                let slot = match &result {
                    Ok((log, _)) => Slot::Open(log.clone()),
                    Err(e) => Slot::Failed(e.clone()),
                };
                parts.insert(p, slot);
                (result, pending)
            };
            if let Some(reply) = reopened {
                let _ = reply.send(match &slot {
                    Ok((_, report)) => Ok(report.clone()),
                    Err(e) => Err(RequestError::Unopenable {
                        partition: p,
                        error: e.clone(),
                    }),
                });
            }
            match slot {
                Ok((log, _)) => {
                    if let Some(r) = retention {
                        log.set_retention(r);
                    }
                    shard.lru.borrow_mut().touch(p);
                    for req in pending {
                        shard.dispatch(&log, req);
                    }
                    shard.close_over_cap(p);
                }
                Err(e) => {
                    for req in pending {
                        req.fail(RequestError::Unopenable {
                            partition: p,
                            error: e.clone(),
                        });
                    }
                }
            }
        });
    }

    /// Opens partition `p`'s log with its options (those of a create
    /// waiting for it written first): the log or why not, and its
    /// retention.
    pub(super) async fn open_with_options(self: &Rc<Self>, p: u64) -> (Opened, Option<Retention>) {
        let asked = match self.partitions.borrow().get(&p) {
            Some(Slot::Opening(pending)) => pending.iter().find_map(|r| match r {
                Request::Create {
                    options: Some(o), ..
                } => Some(o.clone()),
                _ => None,
            }),
            _ => None,
        };
        if let Some(o) = asked {
            if let Err((path, e)) = self.write_options(p, &o).await {
                let e = super::options::open_error("write partition options", path, e);
                return (Err(e), None);
            }
            // Written: that create is answered by the open alone.
            if let Some(Slot::Opening(pending)) = self.partitions.borrow_mut().get_mut(&p) {
                let written = pending.iter_mut().find_map(|r| match r {
                    Request::Create { options, .. } if options.is_some() => Some(options),
                    _ => None,
                });
                if let Some(options) = written {
                    *options = None;
                }
            }
        }
        let (config, retention) = match self.partition_config(p).await {
            Ok(c) => c,
            Err(e) => return (Err(e), None),
        };
        let dir = self.dir.join(p.to_string());
        let opened = PartitionLog::open(self.storage.clone(), dir, p, config).await;
        (opened, retention)
    }
}
