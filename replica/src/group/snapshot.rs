//! Snapshots: compacting a journal, and installing what a leader sends.
//!
//! The state a group's journal applies to is already on disk (the partition
//! logs, or the embedder's metadata), so a snapshot is small: for a data
//! group, each partition's commit mark once everything up to the
//! snapshot's index is applied (and, under a policy that does not sync
//! each write, flushed); for the metadata group, the embedder's bytes. A
//! node that installs a data snapshot cuts what lies past its own commit
//! marks, fetches each partition's missing batches from the leader
//! (`net::fetch`), stores them verbatim and moves its marks, all off the
//! loop (`install.rs`), and only then takes the snapshot into its journal;
//! the entries after the snapshot are then written as usual (a batch
//! already stored, the same one, is recognised by its offset and pointer).
//!
//! The data snapshot's layout is in `ends.rs`.

use super::ends::{decode_ends, encode_ends};
use super::install::{Install, Installing};
use super::{Group, Role};
use crate::error::{GroupError, ReplicaError};
use bytes::Bytes;
use raft::eraftpb::Snapshot;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The metadata journal is compacted past this many bytes.
const META_COMPACT_BYTES: u64 = 16 << 20;

/// The commit marks of every partition on `shard`: what the entries
/// applied before the call committed (a batch is in its log before its
/// entry commits). Under a policy that does not sync each write, the
/// partitions are flushed first, so that what the snapshot names is
/// durable before the journal drops the entries' pointers: one after
/// another, not all at once. Each flush's write-back allocates the
/// partition's delayed blocks under its inode's lock, reading block
/// bitmaps from the disk, while that partition's appends wait behind it;
/// flushed together, every partition of the shard stalled at once, each
/// for longer (`docs/bench/cluster-profile.md`).
fn partition_ends(
    engine: &corelog::Handle,
    shard: usize,
    flush: bool,
) -> Result<Vec<(u64, u64)>, corelog::RequestError> {
    let mine: Vec<u64> = engine
        .partitions()
        .wait()?
        .into_iter()
        .filter(|p| engine.shard_of(*p) == shard)
        .collect();
    if flush {
        for p in &mine {
            match engine.flush(*p).wait() {
                Ok(()) | Err(corelog::RequestError::UnknownPartition { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let mut ends = Vec::with_capacity(mine.len());
    for p in mine {
        match engine.stats(p).wait() {
            Ok(s) => ends.push((p, s.commit_mark.unwrap_or(s.end_offset))),
            Err(corelog::RequestError::UnknownPartition { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ends)
}

impl Group {
    /// Compacts the journal up to the last applied entry once it holds
    /// more than its limit. A data group's snapshot needs its partitions
    /// flushed first: that runs on a thread of its own, and the loop goes
    /// on stepping, proposing and applying until it reports back
    /// ([`Group::on_flushed`]).
    pub(super) fn maybe_compact(&mut self) -> Result<(), GroupError> {
        let (bytes, snap) = {
            let j = self.store.rl();
            (j.bytes(), j.snapshot_index())
        };
        let limit = match self.role {
            Role::Meta(_) => META_COMPACT_BYTES.min(self.opts.compact_bytes),
            Role::Data { .. } => self.opts.compact_bytes,
        };
        let index = self.applied;
        // Not while a snapshot is being installed: the partitions' ends
        // the flush would read are moving to the snapshot's.
        let installing = self.install != Installing::Idle;
        if bytes < limit || index <= snap || self.compacting || installing {
            return Ok(());
        }
        match &self.role {
            Role::Meta(sm) => {
                let data = sm.snapshot();
                self.compact_to(index, data)
            }
            Role::Data { shard, .. } => {
                self.compacting = true;
                let (engine, shard, group, inbox) =
                    (self.engine.clone(), *shard, self.id, self.inbox_tx.clone());
                let flush = !self.opts.sync;
                let spawned = std::thread::Builder::new()
                    .name(format!("replica-flush-g{group}"))
                    .spawn(move || {
                        let ends = partition_ends(&engine, shard, flush).map(|e| encode_ends(&e));
                        let _ = inbox.send(super::Inbox::Flushed { index, ends });
                    });
                if let Err(e) = spawned {
                    self.compacting = false;
                    tracing::warn!("group {group}: no thread to flush for a compaction: {e}");
                }
                Ok(())
            }
        }
    }

    /// The partitions are flushed up to at least `index`: compact.
    pub(super) fn on_flushed(
        &mut self,
        index: u64,
        ends: Result<Bytes, corelog::RequestError>,
    ) -> Result<(), GroupError> {
        self.compacting = false;
        match ends {
            Ok(data) => self.compact_to(index, data),
            Err(e) => {
                tracing::warn!("group {}: flushing for a compaction: {e}", self.id);
                Ok(())
            }
        }
    }

    fn compact_to(&mut self, index: u64, data: Bytes) -> Result<(), GroupError> {
        let before = self.store.rl().bytes();
        self.store
            .wl()
            .compact(index, data)
            .map_err(|source| GroupError::Journal {
                group: self.id,
                source,
            })?;
        tracing::info!(
            "group {}: journal compacted up to entry {index} ({before} bytes before)",
            self.id
        );
        Ok(())
    }

    /// Whether the next `Ready` may be taken. A snapshot raft-rs holds for
    /// this node is installed first, off the loop (a data snapshot's
    /// partitions by the persister, `install.rs`; the metadata by its
    /// applier, `meta_applier.rs`): its `Ready` waits until the state it
    /// names is in place, and meanwhile the loop steps messages and answers the
    /// leader's heartbeats (so that a long fetch does not cost the leader
    /// its quorum). An install that failed is started again an election
    /// timeout later.
    pub(super) fn may_take_ready(&mut self) -> Result<bool, GroupError> {
        let Some(snap) = self.raw.raft.raft_log.unstable_snapshot() else {
            return Ok(true);
        };
        let index = snap.get_metadata().index;
        let start = match self.install {
            Installing::Done(i) if i == index => return Ok(true),
            Installing::Running => false,
            Installing::Retry(at) => Instant::now() >= at,
            Installing::Idle | Installing::Done(_) => true,
        };
        if start {
            let data = snap.data.clone();
            self.start_install(index, data)?;
        }
        self.answer_heartbeats();
        Ok(false)
    }

    /// Hands the snapshot at `index` to be installed: the metadata to its
    /// applier, a data snapshot's partitions to the persister.
    fn start_install(&mut self, index: u64, data: Bytes) -> Result<(), GroupError> {
        let group = self.id;
        if let Some(a) = &self.meta_applier {
            a.restore(index, data)?;
            self.install = Installing::Running;
            return Ok(());
        }
        let ends = decode_ends(&data).ok_or(GroupError::SnapshotUndecodable { group })?;
        let leader = self.raw.raft.leader_id;
        let Some(addr) = self.cluster.node(leader).map(|n| n.replica) else {
            let e = GroupError::SnapshotFromUnknown {
                group,
                node: leader,
            };
            self.on_installed(index, Err(e));
            return Ok(());
        };
        tracing::info!(
            "group {group}: installing the partitions of a snapshot at entry {index} from node {leader}"
        );
        let local = self
            .cluster
            .node(self.raw.raft.id)
            .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |n| n.replica.ip());
        let key = crate::net::auth::Key::of(self.cluster.secret.as_ref());
        self.persister.install(Install {
            index,
            ends,
            leader,
            addr,
            local,
            key,
        })?;
        self.install = Installing::Running;
        Ok(())
    }

    /// The snapshot at `index` is installed (or failed to be): the
    /// metadata restored, or a data snapshot's partitions in place.
    pub(super) fn on_installed(&mut self, index: u64, result: Result<(), GroupError>) {
        self.install = match result {
            Ok(()) => Installing::Done(index),
            Err(e) => {
                tracing::warn!("{e}; the snapshot's install is tried again");
                let window = self.opts.tick * self.opts.election_ticks as u32;
                Installing::Retry(Instant::now() + window)
            }
        };
    }

    /// Sends the heartbeat answers raft-rs queued, ahead of the messages
    /// waiting for the next `Ready` ([`Group::send_heartbeat_answers`]).
    fn answer_heartbeats(&mut self) {
        let queued = std::mem::take(&mut self.raw.raft.msgs);
        self.raw.raft.msgs = self.send_heartbeat_answers(queued);
    }

    /// Takes a snapshot the leader sent into the journal, once the state it
    /// names is in place (the embedder's metadata, or each partition's
    /// batches, installed off the loop before its `Ready` was taken,
    /// [`Group::may_take_ready`]).
    pub(super) fn install_snapshot(&mut self, snap: &Snapshot) -> Result<(), GroupError> {
        let index = snap.get_metadata().index;
        tracing::info!(
            "group {}: installing a snapshot at entry {index} from node {}",
            self.id,
            self.raw.raft.leader_id
        );
        debug_assert!(matches!(self.install, Installing::Done(i) if i == index));
        self.install = Installing::Idle;
        if let Role::Data { .. } = &self.role {
            self.clients.clear_pending();
            self.stamps.clear();
        }
        self.store
            .wl()
            .apply_snapshot(snap)
            .map_err(|source| GroupError::Journal {
                group: self.id,
                source,
            })?;
        self.applied = self.applied.max(index);
        self.sent = self.sent.max(index);
        self.written = self.store.rl().last_index();
        // The entries up to the snapshot's are gone from this node's log
        // and are never applied here: a send or change waiting on one is
        // answered now, not at its commit timeout. Whether it was stored
        // this node cannot tell (its entry may have committed under the
        // leader that sent the snapshot), so the answer says so.
        let later = self.waiters.split_off(&index.saturating_add(1));
        for (_, p) in std::mem::replace(&mut self.waiters, later) {
            p.waiter.fail(ReplicaError::NotCommitted);
        }
        self.status().applied.store(self.applied, Ordering::Relaxed);
        Ok(())
    }
}
