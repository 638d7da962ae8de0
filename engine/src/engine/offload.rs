//! The engine's side of tiered storage (`Config::tier`): the offloader
//! thread that copies sealed segments to the store and trims local copies,
//! and polls below a partition's local start routed to the store.
//!
//! The offloader asks each partition's shard for its sealed segments
//! (`Request::Offloadable`) and reads their files itself: sealed files
//! never change, so a read from another thread sees what the shard wrote.
//! Every removal (`Request::TrimOffloaded`) is the shard's, like
//! retention's: a shard remains the only writer of its partitions' files.

use super::Handle;
use crate::error::RequestError;
use crate::offloader::OffloadReport;
use crate::queue::Reply;
use corelog_segment::log::{PollFrom, PollReply, SealedSegment};
use corelog_tier::{Tier, TierError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl Handle {
    /// The tier (`Config::tier`), when the engine has one: its counters,
    /// its cache's figures, the manifests.
    pub fn tier(&self) -> Option<&Arc<Tier>> {
        self.shared.tier.as_ref()
    }

    /// One offload pass over every partition, on the calling thread
    /// (blocking; the offloader thread runs one every
    /// `TierConfig::upload_every`): sealed segments copied to the store,
    /// local copies past `local_retention_bytes` removed once it holds
    /// them, the store's segments past retention deleted. Without a tier,
    /// an empty report.
    pub fn offload_pass(&self) -> OffloadReport {
        let mut report = OffloadReport::default();
        let Some(tier) = self.shared.tier.clone() else {
            return report;
        };
        let partitions = match self.partitions().wait() {
            Ok(p) => p,
            Err(e) => {
                report.failed.push((u64::MAX, e.to_string()));
                return report;
            }
        };
        for p in partitions {
            if let Err(why) = self.offload_partition(&tier, p, &mut report) {
                report.failed.push((p, why));
            }
        }
        let c = tier.counters();
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        c.backlog_segments.store(report.backlog_segments, relaxed);
        c.backlog_bytes.store(report.backlog_bytes, relaxed);
        report
    }

    fn offload_partition(
        &self,
        tier: &Tier,
        partition: u64,
        report: &mut OffloadReport,
    ) -> Result<(), String> {
        let o = self
            .send(self.shard_of(partition), |reply| {
                crate::request::Request::Offloadable { partition, reply }
            })
            .wait()
            .map_err(|e| e.to_string())?;
        let waiting =
            |sealed: &[SealedSegment]| sealed.iter().fold((0, 0), |(n, b), s| (n + 1, b + s.len));
        let pass = match tier.offload(
            partition,
            &o.sealed,
            &o.retention,
            (o.first_offset, o.bytes),
            now_micros(),
        ) {
            Ok(pass) => pass,
            Err(e) => {
                let (n, b) = waiting(&o.sealed);
                report.backlog_segments += n;
                report.backlog_bytes += b;
                return Err(e.to_string());
            }
        };
        report.uploaded += pass.uploaded;
        report.backlog_segments += pass.backlog.0;
        report.backlog_bytes += pass.backlog.1;
        if pass.offloaded_through == 0 {
            return Ok(());
        }
        let keep_bytes = tier.config().local_retention_bytes;
        let through = pass.offloaded_through;
        let trimmed = self
            .send(self.shard_of(partition), |reply| {
                crate::request::Request::TrimOffloaded {
                    partition,
                    through,
                    keep_bytes,
                    reply,
                }
            })
            .wait()
            .map_err(|e| e.to_string())?;
        report.trimmed += trimmed.len();
        Ok(())
    }
}

/// A poll that the local log answered from later than asked (the batches
/// asked for were offloaded and trimmed), served from the store instead.
pub(crate) fn below_local(
    tier: Arc<Tier>,
    partition: u64,
    from: PollFrom,
    max_bytes: u64,
    local: Reply<PollReply>,
) -> Reply<PollReply> {
    Reply::joined(async move {
        let r = local.await?;
        let ask = match from {
            PollFrom::Offset(o) => o < r.first_offset(),
            PollFrom::First | PollFrom::Timestamp(_) => true,
            PollFrom::Last => false,
        };
        // A local log from offset 0 has nothing below it: such polls never
        // wait on the store (nor fail with it).
        if !ask || r.first_offset() == 0 || !tier.holds_before(partition, r.first_offset()) {
            return Ok(r);
        }
        let failed = |e: TierError| RequestError::Tier {
            partition,
            error: Arc::new(e),
        };
        match tier.poll_on_reader(partition, from, max_bytes).await {
            Ok(Ok(Some(remote))) if remote.first_offset() < r.first_offset() || r.is_empty() => {
                Ok(remote)
            }
            Ok(Ok(_)) => Ok(r),
            Ok(Err(e)) => Err(failed(e)),
            Err(_) => Err(failed(TierError::Stopped)),
        }
    })
}

impl Handle {
    /// Deletes `partition`: closes its log (in-flight appends finish or
    /// fail), removes its directory and syncs the parent directory.
    /// Polls already holding its segments keep reading them. Deleting a
    /// partition that does not exist succeeds. Not atomic: after a crash
    /// during the removal, the remains open (or fail to) as a partition;
    /// delete it again. With a tier, what the store holds for it is
    /// deleted too, on a tier thread (a store that fails is logged, and
    /// its objects stay: a later log of that id does not trust them).
    pub fn delete_partition(&self, partition: u64) -> Reply<()> {
        let local = self.send(self.shard_of(partition), |reply| {
            crate::request::Request::Delete { partition, reply }
        });
        match &self.shared.tier {
            Some(t) => delete_remote(t, partition, local),
            None => local,
        }
    }
}

/// A partition deleted locally (`local`), then in the store.
fn delete_remote(tier: &Arc<Tier>, partition: u64, local: Reply<()>) -> Reply<()> {
    let tier = tier.clone();
    Reply::joined(async move {
        local.await?;
        match tier.purge_on_reader(partition).await {
            Ok(Ok(n)) => tracing::info!("tier: partition {partition} deleted: {n} objects"),
            Ok(Err(e)) => tracing::warn!(
                "tier: partition {partition} deleted locally; its objects stay in the store: {e}"
            ),
            Err(_) => tracing::warn!(
                "tier: partition {partition} deleted locally; the tier stopped before its objects were"
            ),
        }
        Ok(())
    })
}
