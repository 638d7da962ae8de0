//! A data snapshot's partitions, installed off the group's loop.
//!
//! A snapshot names each partition's commit mark at its index. Installing
//! it on a follower asks the engine how far each partition reaches, cuts
//! what lies past this node's own mark (uncommitted, and no entry after the
//! snapshot names it any more), fetches the missing committed batches from
//! the leader (`net::fetch`, a network round trip per partition and as
//! long as the data takes) and moves the mark. None of it runs on the
//! loop: the persister runs it after every job handed to it before, and
//! hands back [`Inbox::Installed`](crate::inbox::Inbox::Installed).
//! Meanwhile the loop takes no `Ready` (the snapshot's is the next one), so
//! no write of a later entry can reach a partition before the install is
//! done, and it goes on stepping messages and answering the leader's
//! heartbeats (`snapshot.rs`).
//!
//! Every step is idempotent: a failed install (the leader unreachable, a
//! fetch cut short) is started again, and a batch already fetched is not
//! fetched twice (the partition's end has moved past it). A crash during
//! the install leaves the journal as it was before the snapshot (the
//! journal takes the snapshot only once the install is done), so the
//! leader sends it again.

use crate::error::GroupError;
use crate::net::{auth::Key, fetch};
use corelog::replication::ReplicaLog;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// One data snapshot to install: what it names and where to fetch it.
pub(super) struct Install {
    /// The snapshot's index.
    pub index: u64,
    /// Each partition's commit mark at the snapshot.
    pub ends: Vec<(u64, u64)>,
    /// The leader that sent it.
    pub leader: u64,
    /// The leader's replica address.
    pub addr: SocketAddr,
    /// This node's replica address, which fetches connect from.
    pub local: IpAddr,
    pub key: Key,
}

/// Where a data snapshot's install stands on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Installing {
    /// None under way.
    Idle,
    /// The persister is installing one.
    Running,
    /// The partitions hold what the snapshot at this index names: its
    /// `Ready` may be taken.
    Done(u64),
    /// The last install failed: another starts from this time.
    Retry(Instant),
}

impl Install {
    /// Installs every partition the snapshot names.
    pub(super) fn run(&self, group: u32, engine: &corelog::Handle) -> Result<(), GroupError> {
        for &(partition, end) in &self.ends {
            self.partition(group, engine, partition, end)?;
        }
        Ok(())
    }

    /// One partition: cut past this node's commit mark, fetched from the
    /// leader up to `end`, and the mark moved there.
    fn partition(
        &self,
        group: u32,
        engine: &corelog::Handle,
        partition: u64,
        end: u64,
    ) -> Result<(), GroupError> {
        let engine_err = |source| GroupError::Engine {
            group,
            partition,
            source: Box::new(source),
        };
        let (have, mark) = match engine.stats(partition).wait() {
            Ok(s) => (s.end_offset, s.commit_mark.unwrap_or(s.end_offset)),
            Err(corelog::RequestError::UnknownPartition { .. }) => (0, 0),
            Err(source) => return Err(engine_err(source)),
        };
        if have > mark {
            cut(group, engine, partition, mark)?;
        }
        let have = have.min(mark);
        if have < end {
            let got = fetch::fetch(
                self.local, self.addr, &self.key, group, partition, have, end, engine,
            )
            .map_err(|source| GroupError::Fetch {
                group,
                source: Box::new(source),
            })?;
            tracing::info!(
                "group {group}: partition {partition}: fetched offsets {have}..{got} from node {}",
                self.leader
            );
        }
        engine
            .set_commit_mark(partition, end)
            .wait()
            .map_err(engine_err)
    }
}

/// Cuts `partition`'s log from `offset` on, crash-safely, and waits.
fn cut(
    group: u32,
    engine: &corelog::Handle,
    partition: u64,
    offset: u64,
) -> Result<(), GroupError> {
    let answer = engine.cut_suffix(partition, offset).wait();
    cut_answered(group, partition, offset, answer, "a snapshot replaced them")
}

/// A cut of `partition`'s uncommitted suffix, answered (`why`: what
/// replaced it, for the log line).
pub(super) fn cut_answered(
    group: u32,
    partition: u64,
    offset: u64,
    answer: Result<Option<corelog::RecoveryReport>, corelog::RequestError>,
    why: &str,
) -> Result<(), GroupError> {
    match answer {
        Ok(report) => {
            if report.is_some() {
                tracing::info!(
                    "group {group}: partition {partition}: cut the uncommitted batches from offset {offset} ({why})"
                );
            }
            Ok(())
        }
        Err(corelog::RequestError::UnknownPartition { .. }) => Ok(()),
        Err(source) => Err(GroupError::Cut {
            group,
            partition,
            offset,
            source: Box::new(source),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelog::RequestError;

    /// A cut the engine refused or failed stops the group with the
    /// partition and offset named: the entries replacing the suffix must
    /// never be written over a suffix still there. A partition not (yet)
    /// on this node has nothing to cut.
    #[test]
    fn a_failed_cut_is_the_groups_error_and_a_missing_partition_is_nothing_to_cut() {
        let answered = |answer| cut_answered(2, 7, 100, answer, "a test");
        assert!(answered(Ok(None)).is_ok());
        assert!(answered(Err(RequestError::UnknownPartition { partition: 7 })).is_ok());
        let refused = corelog::CutError::Committed {
            partition: 7,
            from: 100,
            commit: 120,
        };
        for source in [RequestError::Cut(refused), RequestError::ShuttingDown] {
            match answered(Err(source)) {
                Err(GroupError::Cut {
                    group: 2,
                    partition: 7,
                    offset: 100,
                    ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
    }
}
