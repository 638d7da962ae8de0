//! What a replica (the partition's Raft group) uses: appends of batches
//! its leader stamped, the commit mark, the suffix cut, and reads of
//! written batches past the mark, as [`ReplicaLog`], a trait of
//! [`Handle`]'s that a broker that does not replicate never imports.

use super::Handle;
use crate::error::RequestError;
use crate::queue::Reply;
use crate::request::Request;
use bytes::Bytes;
use corelog_segment::log::{AppendAck, RecoveryReport, WrittenBatch};
use corelog_segment::Batch;

/// A [`Handle`]'s operations for the owner of replicated partitions (a
/// Raft group): in scope with `use corelog::replication::ReplicaLog;`.
pub trait ReplicaLog {
    /// Like [`ReplicaLog::append_stamped`], for a stamped batch the caller
    /// already admitted (a replica's leader, which admitted the producer's
    /// batch and stamped it with [`Batch::stamp`]): not checked again.
    fn append_stamped_admitted(&self, partition: u64, batch: Batch) -> Reply<AppendAck>;

    /// Appends a batch a leader already stamped, verbatim (a replica's
    /// path): it must verify, name this partition, and continue its
    /// offsets.
    fn append_stamped(&self, partition: u64, batch: impl Into<Bytes>) -> Reply<AppendAck>;

    /// Moves `partition`'s commit mark to `offset` (it only grows): polls
    /// then see the acknowledged batches ending at or below it. Only for an
    /// engine whose `LogConfig::commit_gate` is on (a replica's), where a
    /// partition serves nothing past its mark, and nothing after it is
    /// opened until the mark is set again.
    fn set_commit_mark(&self, partition: u64, offset: u64) -> Reply<()>;

    /// Removes every message of `partition` from `from` on (where a batch
    /// starts, at or above the commit mark), crash-safely (see
    /// `PartitionLog::cut_suffix`): the report of the reopen that made
    /// the cut, or `None` when nothing lay at or past `from`. Requests
    /// for the partition sent meanwhile wait for the cut log.
    fn cut_suffix(&self, partition: u64, from: u64) -> Reply<Option<RecoveryReport>>;

    /// The whole batch of `partition` whose base offset is `offset`, if
    /// one lies below the log's acknowledgement mark, committed or not (see
    /// `PartitionLog::read_written`): a zero-copy view of the segment.
    /// For the log's owner, such as a Raft node reading back the batches
    /// its journal points at; readers are served by [`Handle::poll`],
    /// which stops at the commit mark. [`WrittenBatch::bytes`] reads it;
    /// [`WrittenBatch::file`] names it in its segment file, for a send by
    /// descriptor.
    fn read_written(&self, partition: u64, offset: u64) -> Reply<Option<WrittenBatch>>;
}

impl ReplicaLog for Handle {
    fn append_stamped_admitted(&self, partition: u64, batch: Batch) -> Reply<AppendAck> {
        self.append_checked(partition, batch, true)
    }

    fn append_stamped(&self, partition: u64, batch: impl Into<Bytes>) -> Reply<AppendAck> {
        match Batch::admit(batch, &self.shared.limits) {
            Ok(batch) => self.send(self.shard_of(partition), |reply| Request::Append {
                partition,
                batch,
                stamped: true,
                reply,
            }),
            Err(error) => Reply::failed(RequestError::Admission { partition, error }),
        }
    }

    fn set_commit_mark(&self, partition: u64, offset: u64) -> Reply<()> {
        self.send(self.shard_of(partition), |reply| Request::SetCommitMark {
            partition,
            offset,
            reply,
        })
    }

    fn cut_suffix(&self, partition: u64, from: u64) -> Reply<Option<RecoveryReport>> {
        self.send(self.shard_of(partition), |reply| Request::CutSuffix {
            partition,
            from,
            reply,
        })
    }

    fn read_written(&self, partition: u64, offset: u64) -> Reply<Option<WrittenBatch>> {
        self.send(self.shard_of(partition), |reply| Request::ReadWritten {
            partition,
            offset,
            reply,
        })
    }
}
