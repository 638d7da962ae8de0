//! One simulated node: a raft-rs `RawNode`, the partition's log
//! (`PartitionLog` on the node's `SimStorage`, gated by a commit mark) and a
//! pointer journal (`journal.rs`) on the same disk. It follows the data
//! group's persistence discipline (`replica/src/group`):
//!
//! - a send's stamped batch is written **once**, into the partition log at
//!   the offset the leader stamped; the journal takes a 24-byte pointer;
//! - a suffix a new leader replaces is cut from the log (`cut_suffix`,
//!   crash-safe) before the new entries' batches are written; the journal
//!   takes the new entries' pointers first (the group's persister waits
//!   for the cut with the writes, so its records may reach the disk before
//!   the cut does);
//! - the journal's sync and the log's appends (durable under
//!   `fsync=batch`) are awaited before any message raft-rs holds for
//!   persistence (an append or vote response) leaves;
//! - applying a committed entry moves the log's commit mark past its batch,
//!   and the leader acknowledges its own proposals there;
//! - a restart reconciles journal and log: a pointer whose batch the log
//!   lacks cuts the journal there, a log past the last pointer is cut;
//! - a node whose journal is new (a new cluster, or a wiped disk) is
//!   fenced, and a peer that lost its journal is guarded: the data
//!   groups' own code (`corelog_replica::wiped`), run on this node's
//!   `RawNode`.

use super::bugs::Bugs;
use super::check::Checker;
use super::journal::Journal;
use super::net::Net;
use bytes::Bytes;
use corelog::testing::segment::io::SimStorage;
use corelog::testing::segment::log::{FsyncPolicy, LogConfig, PartitionLog, PollFrom};
use corelog::{Batch, BatchBuilder, BatchRef, Limits, MessageSpec, Stamp};
use corelog_replica::journal::record::{Kind, Pointer};
use corelog_replica::wiped::{guard_lost_journal, Admit, Fence};
use raft::eraftpb::{ConfState, Entry, Message};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RawNode, StateRole, Storage};
use std::collections::BTreeMap;
use std::path::Path;

pub const PARTITION: u64 = 7;
/// raft-rs's `election_tick` (its timeouts fall in [this, twice this)).
pub const ELECTION_TICKS: usize = 20;
const LOG_DIR: &str = "/node/partitions/7";
const JOURNAL_DIR: &str = "/node/replica";

/// Whether the node of `disk`, down, would start fenced: its journal is
/// new or missing.
pub fn fenced_on_disk(disk: &SimStorage) -> bool {
    use corelog::testing::segment::io::Storage as _;
    disk.list_dir(Path::new(JOURNAL_DIR)).map_or(true, |n| {
        n.iter().any(|n| n == "new") || !n.iter().any(|n| n == "state")
    })
}

pub fn limits() -> Limits {
    Limits {
        max_batch_bytes: 1 << 16,
    }
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        fsync: FsyncPolicy::Batch,
        preallocate: false,
        limits: limits(),
        commit_gate: true,
        ..LogConfig::default()
    }
}

/// A node that is running.
pub struct Up {
    pub raw: RawNode<MemStorage>,
    pub log: PartitionLog<SimStorage>,
    journal: Journal,
    /// The last entry applied.
    pub applied: u64,
    /// The offset after the last batch applied: the log's commit mark.
    pub commit_end: u64,
    /// This node's proposals waiting to commit: entry index -> term.
    proposed: BTreeMap<u64, u64>,
    /// While leader: the next offset and the last timestamp to stamp.
    stamp: Option<(u64, u64)>,
    /// The served batches below this offset were checked.
    pub checked: u64,
    /// Votes held back while the journal is new.
    pub fence: Fence,
    /// The fence lifted, the journal's marker not yet dropped.
    pub lifted: bool,
}

/// Why a node stopped: a fault the simulation treats as a failed check.
pub type Fatal = String;

impl Up {
    /// Starts a node on `disk`: recovery of the log, the journal, and the
    /// reconcile between them.
    /// A journal made new here has `incarnation`.
    pub async fn start(
        id: u64,
        disk: &SimStorage,
        bugs: &Bugs,
        incarnation: u64,
    ) -> Result<Up, Fatal> {
        let (mut log, _report) = PartitionLog::open(disk.clone(), LOG_DIR, PARTITION, log_config())
            .await
            .map_err(|e| format!("log open: {e}"))?;
        let (mut journal, rec) = Journal::open(disk, Path::new(JOURNAL_DIR), incarnation)
            .await
            .map_err(|e| format!("journal open: {e}"))?;
        let fence = Fence::new(rec.new.filter(|_| !bugs.no_fence));
        let mut entries = rec.entries;
        // A pointer whose batch the log lacks (a power cut took the write
        // but kept the record): the journal ends before it.
        let mut keep = entries.len();
        for (k, (e, p)) in entries.iter_mut().enumerate() {
            let Some(p) = p else { continue };
            match log.read_written(p.base_offset) {
                Ok(Some(b)) if BatchRef::new(&b, &limits()).is_ok_and(|r| p.names(r)) => {
                    e.data = b;
                }
                _ => {
                    keep = k;
                    break;
                }
            }
        }
        if keep < entries.len() {
            journal
                .cut_from(keep as u64 + 1)
                .await
                .map_err(|e| format!("journal cut: {e}"))?;
            entries.truncate(keep);
        }
        // A log past the last pointer (a power cut kept the write but took
        // the record): cut there.
        let last_next = entries
            .iter()
            .rev()
            .find_map(|(_, p)| p.map(|p| p.next_offset()))
            .unwrap_or(0);
        if !bugs.no_reconcile && log.stats().end_offset > last_next {
            if let Some((l, _)) = log
                .cut_suffix(last_next)
                .await
                .map_err(|e| format!("reconcile cut at {last_next}: {e}"))?
            {
                log = l;
            }
        }
        // The commit index is persisted lazily: it may name entries the
        // reconcile cut (never acknowledged here); lowered to the last entry,
        // as `Group::open` does, since raft-rs refuses a commit past the log.
        let mut hs = rec.hs;
        hs.commit = hs.commit.min(entries.len() as u64);
        let store = MemStorage::new_with_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        {
            let ents: Vec<Entry> = entries.into_iter().map(|(e, _)| e).collect();
            let mut w = store.wl();
            w.append(&ents).map_err(|e| format!("raft storage: {e}"))?;
            w.set_hardstate(hs);
        }
        let cfg = raft::Config {
            id,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: 4,
            applied: 0,
            // Small and few, so catching up takes many round trips (as a
            // wiped node's catch-up of a long log does in a cluster), and
            // what happens partway through it is searched.
            max_size_per_msg: 4 << 10,
            max_inflight_msgs: 2,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&cfg, store, &logger).map_err(|e| format!("raft: {e}"))?;
        Ok(Up {
            raw,
            log,
            journal,
            applied: 0,
            commit_end: 0,
            proposed: BTreeMap::new(),
            stamp: None,
            checked: 0,
            fence,
            lifted: false,
        })
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// A client's send, proposed here as leader: stamped with the next
    /// offset and proposed as the stamped bytes. `false` when raft-rs drops it.
    pub fn propose(&mut self, tag: u64, count: usize, size: usize, now: u64) -> bool {
        let Some((next, last_ts)) = self.stamp.or_else(|| self.stamp_state()) else {
            return false;
        };
        let ts = last_ts.max(now * 1000);
        let Some(batch) = producer_batch(tag, count, size) else {
            return false;
        };
        let stamped = batch.stamp(Stamp {
            partition_id: PARTITION,
            base_offset: next,
            base_timestamp: ts,
        });
        let data = stamped.bytes().clone();
        if self.raw.propose(vec![], data.to_vec()).is_err() {
            return false;
        }
        let index = self.raw.raft.raft_log.last_index();
        self.proposed.insert(index, self.raw.raft.term);
        self.stamp = Some((next + count as u64, ts));
        true
    }

    /// The next offset and the last timestamp after the last batch in the
    /// Raft log (committed or not): where this leader's stamps go on.
    fn stamp_state(&self) -> Option<(u64, u64)> {
        let log = &self.raw.raft.raft_log;
        let mut i = log.last_index();
        while i > 0 && i >= log.first_index() {
            let ents = log
                .entries(i, 1 << 20, GetEntriesContext::empty(false))
                .ok()?;
            if let Some(e) = ents.first().filter(|e| !e.data.is_empty()) {
                let b = BatchRef::new(&e.data, &limits()).ok()?;
                return Some((
                    b.base_offset() + u64::from(b.message_count()),
                    b.base_timestamp(),
                ));
            }
            i -= 1;
        }
        Some((0, 0))
    }

    /// Handles one `Ready`, in the order the data group does.
    pub async fn handle_ready(
        &mut self,
        id: u64,
        net: &mut Net,
        check: &mut Checker,
        bugs: &Bugs,
    ) -> Result<(), Fatal> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        // A fence lifted on a message just stepped: the marker goes,
        // durably, before this node's vote (this `Ready`'s) leaves, as the
        // group drops it before stepping the message.
        self.drop_marker().await?;
        let mut rd = self.raw.ready();
        if let Some(ss) = rd.ss() {
            if ss.raft_state != StateRole::Leader {
                self.stamp = None;
            }
        }
        self.send(net, rd.take_messages());
        if !rd.snapshot().is_empty() {
            return Err("a snapshot arrived, and no node compacts".into());
        }
        self.apply(id, rd.take_committed_entries(), check)?;
        let mut writes = Vec::new();
        if !rd.entries().is_empty() {
            let ents = rd.entries().clone();
            // The group's order (`group/write.rs`): where the replaced
            // suffix starts is read from the journal's old pointers; the
            // cut and the batches are queued on the shard, and the journal
            // overwrites the pointers meanwhile, so its records may reach
            // the disk before the cut: written here first, the harder
            // order for a power cut.
            let replaced = self.replaced_from(ents[0].index, bugs);
            let batches = batches_of(&ents)?;
            let kinds: BTreeMap<u64, Pointer> = batches.iter().map(|(i, p, _)| (*i, *p)).collect();
            self.journal
                .append(&ents, |e| {
                    kinds
                        .get(&e.index)
                        .map_or(Kind::Plain, |p| Kind::Pointer(*p))
                })
                .await
                .map_err(|e| format!("journal append: {e}"))?;
            self.raw
                .mut_store()
                .wl()
                .append(&ents)
                .map_err(|e| format!("raft storage: {e}"))?;
            writes = self.write_batches(replaced, batches, bugs).await?;
        }
        if let Some(hs) = rd.hs() {
            self.journal
                .set_hard_state(hs)
                .await
                .map_err(|e| format!("hard state: {e}"))?;
            self.raw.mut_store().wl().set_hardstate(hs.clone());
        }
        if bugs.ack_before_durable {
            self.send(net, rd.take_persisted_messages());
        }
        self.journal
            .sync()
            .await
            .map_err(|e| format!("journal sync: {e}"))?;
        for (index, p, w) in writes {
            w.await.map_err(|e| {
                format!(
                    "the log refused entry {index}'s batch at {}: {e}",
                    p.base_offset
                )
            })?;
        }
        self.send(net, rd.take_persisted_messages());
        let mut light = self.raw.advance(rd);
        if let Some(c) = light.commit_index() {
            self.raw.mut_store().wl().mut_hard_state().commit = c;
        }
        self.send(net, light.take_messages());
        self.apply(id, light.take_committed_entries(), check)?;
        self.raw.advance_apply();
        Ok(())
    }

    /// Where the log is to be cut for entries from `first` on: the first
    /// batch the journal's old pointers name there, if the log holds it.
    fn replaced_from(&self, first: u64, bugs: &Bugs) -> Option<u64> {
        if bugs.no_cut || first > self.journal.last_index() {
            return None;
        }
        (first..=self.journal.last_index())
            .find_map(|i| self.journal.pointer(i))
            .map(|p| p.base_offset)
            .filter(|f| *f < self.log.stats().end_offset)
    }

    /// Cuts the log from `replaced`, then issues `batches`' writes (in
    /// order); the futures resolve once durable.
    async fn write_batches(
        &mut self,
        replaced: Option<u64>,
        batches: Vec<(u64, Pointer, Batch)>,
        bugs: &Bugs,
    ) -> Result<
        Vec<(
            u64,
            Pointer,
            corelog::testing::segment::log::AppendFuture<SimStorage>,
        )>,
        Fatal,
    > {
        if let Some(from) = replaced {
            if let Some((l, _)) = self
                .log
                .cut_suffix(from)
                .await
                .map_err(|e| format!("cut at {from}: {e}"))?
            {
                self.log = l;
                let _ = self.log.set_commit_mark(self.commit_end);
                self.checked = self.checked.min(from);
            }
        }
        let mut out = Vec::new();
        for (index, p, batch) in batches {
            if bugs.serve_uncommitted {
                let _ = self.log.set_commit_mark(p.next_offset());
            }
            out.push((index, p, self.log.append_stamped(batch)));
        }
        Ok(out)
    }

    /// Applies committed entries: moves the commit mark past each batch
    /// and acknowledges this node's own proposals.
    fn apply(&mut self, id: u64, ents: Vec<Entry>, check: &mut Checker) -> Result<(), Fatal> {
        let committed = self.raw.raft.raft_log.committed;
        for e in ents {
            if e.index > committed {
                check.violation(
                    id,
                    format!(
                        "applies entry {} past its commit index {committed}",
                        e.index
                    ),
                );
            }
            if !e.data.is_empty() {
                let b = BatchRef::new(&e.data, &limits())
                    .map_err(|err| format!("committed entry {}: {err}", e.index))?;
                let (base, next) = (
                    b.base_offset(),
                    b.base_offset() + u64::from(b.message_count()),
                );
                let bytes = Bytes::from(e.data.to_vec());
                check.applied(id, base, next, &bytes);
                self.log
                    .set_commit_mark(next)
                    .map_err(|err| format!("commit mark: {err}"))?;
                self.commit_end = next;
                if self.proposed.remove(&e.index) == Some(e.term) {
                    check.acknowledged(base);
                }
            }
            self.proposed.retain(|i, _| *i > e.index);
            self.applied = e.index;
        }
        Ok(())
    }

    /// Checks every batch this node serves past what it checked before.
    pub fn check_served(&mut self, id: u64, check: &mut Checker) {
        if let Some(mark) = self.log.commit_mark() {
            if mark > check.end && mark > self.commit_end {
                check.violation(
                    id,
                    format!("commit mark {mark} past the committed end {}", check.end),
                );
            }
        }
        if self.applied > self.raw.raft.raft_log.committed {
            check.violation(
                id,
                format!(
                    "applied {} past committed {}",
                    self.applied, self.raw.raft.raft_log.committed
                ),
            );
        }
        loop {
            let reply = match self.log.poll(PollFrom::Offset(self.checked), 64 << 10) {
                Ok(r) => r,
                Err(e) => {
                    check.violation(id, format!("poll from {}: {e}", self.checked));
                    return;
                }
            };
            if reply.is_empty() {
                return;
            }
            if let Err(e) = reply.verify(&limits()) {
                check.violation(id, format!("serves damage: {e}"));
                return;
            }
            for b in reply.batches() {
                if b.base_offset() >= self.checked {
                    check.served(id, b.base_offset(), b.as_bytes());
                }
            }
            if reply.next_offset() <= self.checked {
                return;
            }
            self.checked = reply.next_offset();
        }
    }

    /// Every batch this node serves, from offset 0.
    pub fn served_log(&self) -> Result<BTreeMap<u64, Bytes>, String> {
        let mut out = BTreeMap::new();
        let mut from = 0;
        loop {
            let reply = self
                .log
                .poll(PollFrom::Offset(from), 64 << 10)
                .map_err(|e| format!("poll from {from}: {e}"))?;
            if reply.is_empty() || reply.next_offset() <= from {
                return Ok(out);
            }
            reply
                .verify(&limits())
                .map_err(|e| format!("damage: {e}"))?;
            for b in reply.batches() {
                out.insert(b.base_offset(), Bytes::copy_from_slice(b.as_bytes()));
            }
            from = reply.next_offset();
        }
    }

    /// Steps a message from the network, past the fence and the guard for
    /// a lost journal, as the data group does.
    ///
    /// Under `fsync=batch` a node whose disk was never wiped holds every
    /// entry it acknowledged, so a leader's heartbeat never names a commit
    /// past its log: if one does (the guard lowers it), the node lost
    /// entries it said it held, a violation (`wiped`: this node's disk was
    /// wiped in this run, where it is what the guard is for).
    pub fn step(
        &mut self,
        id: u64,
        mut m: Message,
        net: &mut Net,
        check: &mut Checker,
        wiped: bool,
    ) {
        let stored_last = self.stored_last();
        if !wiped
            && m.get_msg_type() == raft::eraftpb::MessageType::MsgHeartbeat
            && m.commit > stored_last
        {
            check.violation(
                id,
                format!(
                    "told entries up to {} are committed, holding {stored_last}: it lost entries it acknowledged",
                    m.commit
                ),
            );
        }
        match self.fence.admit(&m, stored_last, self.raw.raft.term, 3) {
            Admit::Drop => return,
            Admit::Lift(_) => self.lift(),
            Admit::Step => {}
        }
        if let Some(nack) = guard_lost_journal(&mut self.raw, 0, id, stored_last, &mut m) {
            net.send_all(vec![nack]);
        }
        let _ = self.raw.step(m);
        // As the group does after each step (`step_peer`); the marker goes
        // before the next `Ready` is handled.
        if self.fence.lifts(&self.raw, self.stored_last()).is_some() {
            self.lift();
        }
    }

    /// Sends `msgs`, a fenced node's vote requests marked, as the group
    /// sends them.
    fn send(&self, net: &mut Net, mut msgs: Vec<Message>) {
        for m in &mut msgs {
            self.fence.mark(m);
        }
        net.send_all(msgs);
    }

    /// The last entry the node's Raft storage holds.
    fn stored_last(&self) -> u64 {
        self.raw.store().last_index().unwrap_or(0)
    }

    /// Lifts the fence once this node has caught up with a leader, or
    /// leads; then drops the journal's marker, durably.
    pub async fn check_fence(&mut self) -> Result<(), Fatal> {
        if self.fence.lifts(&self.raw, self.stored_last()).is_some() {
            self.lift();
        }
        self.drop_marker().await
    }

    /// Drops the journal's marker, durably, once the fence lifted.
    async fn drop_marker(&mut self) -> Result<(), Fatal> {
        if self.lifted {
            self.journal
                .caught_up()
                .await
                .map_err(|e| format!("journal marker: {e}"))?;
            self.lifted = false;
        }
        Ok(())
    }

    fn lift(&mut self) {
        self.fence.lift();
        self.lifted = true;
    }
}

/// A producer's batch of `count` messages of `size` bytes, tagged `tag`.
fn producer_batch(tag: u64, count: usize, size: usize) -> Option<Batch> {
    let payloads: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            (0..size)
                .map(|j| (tag as usize * 31 + i * 7 + j) as u8)
                .collect()
        })
        .collect();
    let mut b = BatchBuilder::new();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: (u128::from(tag) << 32) | i as u128,
            timestamp: tag,
            payload: p,
            user_headers: b"",
        });
    }
    Batch::admit(b.build().ok()?, &limits()).ok()
}

/// The batch of each entry that carries one, admitted, with its pointer.
fn batches_of(ents: &[Entry]) -> Result<Vec<(u64, Pointer, Batch)>, Fatal> {
    let mut out = Vec::new();
    for e in ents {
        if e.data.is_empty() {
            continue;
        }
        let batch = Batch::admit(Bytes::from(e.data.to_vec()), &limits())
            .map_err(|err| format!("entry {}: {err}", e.index))?;
        let Some(p) = Pointer::of(batch.as_ref()) else {
            return Err(format!("entry {}: no pointer", e.index));
        };
        out.push((e.index, p, batch));
    }
    Ok(out)
}
