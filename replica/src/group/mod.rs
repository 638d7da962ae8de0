//! One Raft group's loop, on a thread of its own: it owns the group's
//! `RawNode` and journal, steps messages from peers, proposes what the
//! handle sends, ticks, and handles each `Ready` in the order raft-rs
//! asks: send the leader's messages, install a snapshot, apply committed
//! entries, issue new entries' batches to their partition logs and write
//! their journal records, record the hard state; then the persister
//! (`persist.rs`) waits for the writes and the `fdatasync` (under `sync`)
//! off the loop, and when it hands the `Ready` back the loop sends the
//! messages that waited for persistence and tells raft-rs
//! (`advance_append_async`, `on_persist_ready`).
//!
//! Group commit comes for free: every proposal that arrived while the last
//! sync ran is written and synced together.

mod after_write;
mod applying;
mod confirmation;
mod ends;
pub(crate) mod fence;
mod fencing;
mod install;
mod lease;
pub(crate) mod lost_journal;
mod meta_applier;
mod overwritten;
mod peers;
mod persist;
mod propose;
mod reconcile;
mod repeats;
mod snapshot;
mod stamps;
mod write;

use crate::apply::ApplyItem;
use crate::config::{ClusterConfig, ReplicaOptions};
use crate::error::{GroupError, ReplicaError};
use crate::inbox::{Inbox, Persisted, Proposal};
use crate::journal::storage::JournalStorage;
use crate::journal::Journal;
use crate::machine::MetaMachine;
use crate::net::RaftTransport;
use crate::status::Shared;
use corelog::{AppendAck, Batch};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use futures_channel::oneshot;
use raft::eraftpb::{ConfState, Message, MessageType};
use raft::{RawNode, StateRole};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A client waiting for its entry.
enum Waiter {
    Append(oneshot::Sender<Result<AppendAck, ReplicaError>>),
    Count(oneshot::Sender<Result<u64, ReplicaError>>),
    Meta(oneshot::Sender<Result<bool, ReplicaError>>),
}

impl Waiter {
    fn fail(self, e: ReplicaError) {
        let _ = match self {
            Waiter::Append(tx) => tx.send(Err(e)).map_err(|_| ()),
            Waiter::Count(tx) => tx.send(Err(e)).map_err(|_| ()),
            Waiter::Meta(tx) => tx.send(Err(e)).map_err(|_| ()),
        };
    }
}

struct Awaited {
    term: u64,
    deadline: Instant,
    waiter: Waiter,
}

/// The metadata group's state machine, or a data group's applier.
pub(crate) enum Role {
    Meta(Arc<dyn MetaMachine>),
    Data {
        shard: usize,
        applier: futures_channel::mpsc::UnboundedSender<Vec<ApplyItem>>,
        meta: Arc<dyn MetaMachine>,
    },
}

/// How to start a group.
pub(crate) struct GroupSetup {
    pub id: u32,
    pub dir: PathBuf,
    pub role: Role,
    pub inbox: Receiver<Inbox>,
    pub inbox_tx: Sender<Inbox>,
    pub transport: RaftTransport,
    pub shared: Arc<Shared>,
    pub engine: corelog::Handle,
    pub cluster: ClusterConfig,
    pub opts: ReplicaOptions,
}

pub(crate) struct Group {
    id: u32,
    raw: RawNode<JournalStorage>,
    store: JournalStorage,
    inbox: Receiver<Inbox>,
    inbox_tx: Sender<Inbox>,
    transport: RaftTransport,
    shared: Arc<Shared>,
    role: Role,
    engine: corelog::Handle,
    cluster: ClusterConfig,
    opts: ReplicaOptions,
    waiters: BTreeMap<u64, Awaited>,
    /// The last entry stored (data) or applied (metadata) here.
    applied: u64,
    /// The last entry handed to the applier.
    sent: u64,
    /// While leader: the first index of this term (its empty entry).
    leader_since: Option<u64>,
    /// While leader: each partition's next offset and last timestamp.
    stamps: stamps::StampBook,
    /// Proposals waiting for this new leader to apply its predecessors'.
    held: VecDeque<(Instant, Proposal)>,
    last_transfer: Instant,
    /// A compaction's flush is running.
    compacting: bool,
    last_progress_log: Instant,
    last_sync: Instant,
    /// Each client's last send proposed here, and what became of it.
    clients: repeats::RepeatTable,
    /// Votes held back while this node's journal is new (`fence.rs`).
    fence: fence::Fence,
    /// Until when a majority confirmed this leader (`lease.rs`).
    lease: lease::LeaderLease,
    /// When this leader last asked for a confirmation.
    last_question: Instant,
    /// The batches of entries admission verified, by entry index (with the
    /// entry's term): a leader's own, stamped, and those a follower's
    /// reader checked as they arrived (`inbox::verified_batches`). Their
    /// journal records are batch records (no second hash of the data),
    /// and applying them does not check their frames again. Taken when
    /// applied (with any older); cleared when leadership ends.
    admitted: BTreeMap<u64, (u64, Batch)>,
    /// The engine's acknowledgement of each batch this node wrote for a
    /// send waiting here, by entry index (answered once the entry
    /// commits). Kept across a change of leader: a send proposed here
    /// whose entry a later leader commits is answered with it.
    acks: BTreeMap<u64, AppendAck>,
    /// The last entry whose batch is in its partition's log (as far as
    /// this node may say it holds entries, with the journal's synced
    /// index).
    written: u64,
    /// The group's persister thread (`persist.rs`).
    persister: persist::Persister,
    /// `Ready`s handed to the persister and not yet handed back: each
    /// one's number and last entry (0 for none; lowered when a later
    /// `Ready` replaces entries).
    inflight: VecDeque<(u64, u64)>,
    /// A snapshot installed by the `Ready` numbered so: applied for
    /// raft-rs once that `Ready` is persisted.
    snapshot_applied: Option<(u64, u64)>,
    /// While set, the persister issues the partition requests of every
    /// `Ready` up to this number: one of them found its shard's queue full
    /// (`write.rs`).
    deferred: Option<u64>,
    /// A snapshot's install off the loop (`install.rs`).
    install: install::Installing,
    /// The metadata group's applier thread (`meta_applier.rs`).
    meta_applier: Option<meta_applier::MetaApplier>,
}

impl Group {
    /// Opens the journal and builds the node (on the group's thread: the
    /// journal is not `Send`).
    pub(crate) fn open(s: GroupSetup) -> Result<Group, GroupError> {
        let id = s.id;
        let (journal, applied, fence) = open_journal(&s)?;
        let cfg = raft::Config {
            id: s.shared.me,
            election_tick: s.opts.election_ticks,
            heartbeat_tick: s.opts.heartbeat_ticks,
            applied,
            max_size_per_msg: 4 << 20,
            max_inflight_msgs: 64,
            check_quorum: true,
            pre_vote: true,
            max_uncommitted_size: 512 << 20,
            ..Default::default()
        };
        let written = journal.last_index();
        let store = JournalStorage::new(journal);
        let logger = slog::Logger::root(crate::slog_drain::TracingDrain { group: id }, slog::o!());
        let raw = RawNode::new(&cfg, store.clone(), &logger).map_err(|e| GroupError::Raft {
            group: id,
            source: e.into(),
        })?;
        let persister = persist::Persister::start(id, s.engine.clone(), s.inbox_tx.clone())?;
        let meta_applier = match &s.role {
            Role::Meta(sm) => Some(meta_applier::MetaApplier::start(
                id,
                sm.clone(),
                s.inbox_tx.clone(),
            )?),
            Role::Data { .. } => None,
        };
        Ok(Group {
            id,
            raw,
            store,
            inbox: s.inbox,
            inbox_tx: s.inbox_tx,
            transport: s.transport,
            shared: s.shared,
            role: s.role,
            engine: s.engine,
            cluster: s.cluster,
            opts: s.opts,
            waiters: BTreeMap::new(),
            applied,
            sent: applied,
            leader_since: None,
            stamps: stamps::StampBook::default(),
            held: VecDeque::new(),
            last_transfer: Instant::now(),
            compacting: false,
            last_progress_log: Instant::now(),
            last_sync: Instant::now(),
            clients: repeats::RepeatTable::default(),
            fence,
            lease: lease::LeaderLease::default(),
            last_question: Instant::now(),
            admitted: BTreeMap::new(),
            acks: BTreeMap::new(),
            written,
            persister,
            inflight: VecDeque::new(),
            snapshot_applied: None,
            deferred: None,
            install: install::Installing::Idle,
            meta_applier,
        })
    }

    /// Runs until told to stop or a fatal error (logged).
    pub(crate) fn run(mut self) {
        let mut next_tick = Instant::now() + self.opts.tick;
        'outer: loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(first) => {
                    let mut msg = Some(first);
                    let mut n = 0;
                    while let Some(m) = msg.take() {
                        if !self.handle(m) {
                            break 'outer;
                        }
                        n += 1;
                        if n < 4096 {
                            msg = self.inbox.try_recv().ok();
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= next_tick {
                self.hold_candidacy();
                self.raw.tick();
                next_tick = Instant::now() + self.opts.tick;
                self.on_tick();
            }
            if self.raw.has_ready() {
                if let Err(e) = self.may_take_ready().and_then(|take| match take {
                    true => self.on_ready(),
                    false => Ok(()),
                }) {
                    tracing::error!("{e}; this group stops on this node");
                    break;
                }
            }
            self.publish_lease();
        }
        self.stop();
    }

    fn stop(&mut self) {
        if let Err(e) = self.store.wl().sync() {
            tracing::error!("group {}: final sync: {e}", self.id);
        }
        for (_, p) in std::mem::take(&mut self.waiters) {
            p.waiter.fail(ReplicaError::Stopped);
        }
        for (_, p) in std::mem::take(&mut self.held) {
            p.fail(ReplicaError::Stopped);
        }
        self.shared.groups[self.id as usize]
            .leader
            .store(0, Ordering::Release);
    }

    fn handle(&mut self, msg: Inbox) -> bool {
        match msg {
            Inbox::Raft(m, verified) => {
                if !self.step_peer(m) {
                    return true;
                }
                // Kept for the entries the log took (and holds as sent).
                for (index, term, batch) in verified {
                    if self.raw.raft.raft_log.term(index) == Ok(term) && index > self.sent {
                        self.admitted.insert(index, (term, batch));
                    }
                }
            }
            Inbox::Propose(p) => self.propose(p),
            Inbox::Applied {
                index,
                term,
                result,
                view,
            } => self.on_applied(index, term, result, view),
            Inbox::Flushed { index, ends } => {
                if let Err(e) = self.on_flushed(index, ends) {
                    tracing::error!("group {}: compaction: {e}", self.id);
                }
            }
            Inbox::Stamped {
                partition,
                epoch,
                result,
            } => self.on_stamped(partition, epoch, result),
            Inbox::Installed { index, result } => self.on_installed(index, result),
            Inbox::MetaApplied {
                index,
                term,
                result,
            } => {
                if let Err(e) = self.on_meta_applied(index, term, result) {
                    tracing::error!("{e}; this group stops on this node");
                    return false;
                }
            }
            Inbox::Persisted(p) => {
                if let Err(e) = self.on_persisted(p) {
                    tracing::error!("{e}; this group stops on this node");
                    return false;
                }
            }
            Inbox::Stop => return false,
        }
        true
    }

    fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    fn status(&self) -> &crate::status::GroupStatus {
        &self.shared.groups[self.id as usize]
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(i, _)| *i)
            .collect();
        for i in expired {
            if let Some(p) = self.waiters.remove(&i) {
                p.waiter.fail(ReplicaError::NotCommitted);
            }
        }
        while self
            .held
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > self.opts.commit_timeout)
        {
            if let Some((_, p)) = self.held.pop_front() {
                p.fail(ReplicaError::NotLeader {
                    leader: self.leader(),
                });
            }
        }
        // A stamp read that never answered is asked again from here.
        self.release_held();
        self.sync_on_interval(now);
        self.status()
            .synced
            .store(self.store.rl().synced_index(), Ordering::Relaxed);
        self.ask_confirmation(now);
        self.check_fence();
        self.follow_cluster_leader(now);
        self.log_catch_up(now);
        if let Err(e) = self.maybe_compact() {
            tracing::error!("group {}: compaction: {e}", self.id);
        }
    }

    /// Under `fsync=interval:MS`: the journal is fdatasynced that often.
    fn sync_on_interval(&mut self, now: Instant) {
        let Some(every) = self.opts.sync_every else {
            return;
        };
        if self.opts.sync || now.duration_since(self.last_sync) < every {
            return;
        }
        self.last_sync = now;
        if let Err(e) = self.store.wl().sync() {
            tracing::error!("group {}: journal sync: {e}", self.id);
        }
    }

    fn leader(&self) -> Option<u64> {
        let l = self.raw.raft.leader_id;
        (l != 0).then_some(l)
    }

    fn on_ready(&mut self) -> Result<(), GroupError> {
        let id = self.id;
        let jerr = |source| GroupError::Journal { group: id, source };
        let mut rd = self.raw.ready();
        if let Some(ss) = rd.ss() {
            let (leader, role) = (ss.leader_id, ss.raft_state);
            self.on_role(leader, role);
        }
        let after_write = self.send_or_defer(rd.take_messages());
        let window = self.opts.tick * self.opts.election_ticks as u32;
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        for rs in rd.take_read_states() {
            self.lease.answered(&rs.request_ctx, window_ms);
        }
        if !rd.snapshot().is_empty() {
            // A data snapshot's partitions are installed already, after
            // every write before it (`may_take_ready`).
            let snap = rd.snapshot().clone();
            self.install_snapshot(&snap)?;
            // raft-rs counts it applied once it counts it persisted.
            self.snapshot_applied = Some((rd.number(), snap.get_metadata().index));
        }
        let committed = rd.take_committed_entries();
        let applied_to = committed.last().map(|e| e.index);
        self.apply_entries(committed)?;
        let mut pending = Vec::new();
        let mut last = 0;
        if let Some(first) = rd.entries().first().map(|e| e.index) {
            self.fail_overwritten(rd.entries());
            self.lower_written(first);
            // The batches go to their partitions' logs, the journal takes
            // pointers to them; the persister waits for both before any
            // acknowledgement (`persist.rs`).
            let w = self.write_batches(rd.number(), rd.entries())?;
            // write_batches took every admitted batch of these entries
            // and says how each is journaled.
            self.store
                .wl()
                .append_as(rd.entries(), |e| w.kind(e))
                .map_err(jerr)?;
            pending = w.pending;
            last = rd.entries().last().map_or(0, |e| e.index);
        }
        if let Some(hs) = rd.hs() {
            self.store.wl().set_hard_state(hs).map_err(jerr)?;
            self.status().term.store(hs.term, Ordering::Relaxed);
        }
        let ticket = match self.opts.sync {
            true => Some(self.store.wl().sync_ticket().map_err(jerr)?),
            false => None,
        };
        let job = persist::Job {
            number: rd.number(),
            pending,
            ticket,
            msgs: self.send_heartbeat_answers(rd.take_persisted_messages()),
            files_from: self.files_from().filter(|_| !after_write.is_empty()),
            after_write,
        };
        self.inflight.push_back((job.number, last));
        self.persister.submit(job)?;
        self.raw.advance_append_async(rd);
        if let Some(index) = applied_to {
            self.raw.advance_apply_to(index);
        }
        self.publish_indexes();
        Ok(())
    }

    /// Entries from `first` on replace what the journal holds there (a
    /// new leader's log differs): nothing from `first` on counts as
    /// written until the writes of the new entries are done.
    fn lower_written(&mut self, first: u64) {
        if first > self.store.rl().last_index() {
            return;
        }
        let kept = first - 1;
        self.written = self.written.min(kept);
        for (_, last) in self.inflight.iter_mut() {
            *last = (*last).min(kept);
        }
    }

    /// The persister is done with every `Ready` up to `p.number`: the
    /// batches are written, the journal synced; raft-rs hears it, and the
    /// messages waiting for it go.
    fn on_persisted(&mut self, p: Persisted) -> Result<(), GroupError> {
        p.result?;
        for (index, term, ack) in p.acks {
            // Only a send waiting here needs it; leadership may move
            // before the entry commits (a transfer to the metadata
            // group's leader), and the send is answered all the same.
            if self.waiters.get(&index).is_some_and(|w| w.term == term) {
                self.acks.insert(index, ack);
            }
        }
        if self.deferred.is_some_and(|n| n <= p.number) {
            self.deferred = None;
        }
        while let Some(&(number, last)) = self.inflight.front() {
            if number > p.number {
                break;
            }
            self.inflight.pop_front();
            self.written = self.written.max(last);
        }
        if let Some(t) = &p.ticket {
            self.store.wl().synced_by(t);
        }
        self.send_after_write(p.after_write, &p.files);
        self.send_persisted(p.msgs);
        self.raw.on_persist_ready(p.number);
        if let Some((number, index)) = self.snapshot_applied {
            if number <= p.number {
                self.snapshot_applied = None;
                self.raw.advance_apply_to(index);
            }
        }
        self.publish_indexes();
        Ok(())
    }

    fn publish_indexes(&self) {
        let st = self.status();
        st.commit
            .store(self.raw.raft.raft_log.committed, Ordering::Relaxed);
        st.last_index
            .store(self.store.rl().last_index(), Ordering::Relaxed);
        st.synced
            .store(self.store.rl().synced_index(), Ordering::Relaxed);
        let snapshot = self.store.rl().snapshot_index();
        st.snapshot.store(snapshot, Ordering::Relaxed);
    }

    fn send(&self, msgs: Vec<Message>) {
        for mut m in msgs {
            self.fence.mark(&mut m);
            self.transport.send(self.id, m);
        }
    }

    /// Sends the heartbeat answers among `msgs` now and gives back the
    /// rest. raft-rs holds every message of a node that does not lead
    /// until its `Ready` is persisted, but a heartbeat's answer says
    /// nothing of what this node holds (only that it hears the leader, and
    /// the commit index it learnt): behind a slow sync it would cost the
    /// leader its quorum (check_quorum) while this node is the only
    /// follower up.
    fn send_heartbeat_answers(&self, msgs: Vec<Message>) -> Vec<Message> {
        let (beats, rest): (Vec<_>, Vec<_>) = msgs
            .into_iter()
            .partition(|m| m.get_msg_type() == MessageType::MsgHeartbeatResponse);
        self.send(beats);
        rest
    }

    /// Sends the messages raft-rs holds until the journal has persisted
    /// what they answer for. Under a durable policy an append response
    /// says "I hold these entries at the durable point", and the leader
    /// counts it toward a majority: one for an entry past the journal's
    /// synced index would acknowledge what a power cut can take, so it is
    /// refused here, loudly, whatever the order of the calls above.
    fn send_persisted(&self, msgs: Vec<Message>) {
        let synced = self.store.rl().synced_index();
        for mut m in msgs {
            self.fence.mark(&mut m);
            let acks = m.get_msg_type() == MessageType::MsgAppendResponse && !m.reject;
            let why = if !acks {
                None
            } else if m.index > self.written {
                Some(format!(
                    "the batches are in the partition logs only to {}",
                    self.written
                ))
            } else if self.opts.sync && m.index > synced {
                Some(format!("the journal is durable only to {synced}"))
            } else {
                None
            };
            if let Some(why) = why {
                self.status().early_acks.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    "group {}: an acknowledgement of entry {} was not sent: {why}",
                    self.id,
                    m.index
                );
                continue;
            }
            self.transport.send(self.id, m);
        }
    }

    fn on_role(&mut self, leader: u64, role: StateRole) {
        let st = &self.shared.groups[self.id as usize];
        let before = st.leader.swap(leader, Ordering::AcqRel);
        if before != leader {
            self.lease.reset();
            st.leader_changes.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                "group {}: leader is now {} (term {}; this node is {:?})",
                self.id,
                if leader == 0 {
                    "unknown".to_string()
                } else {
                    format!("node {leader}")
                },
                self.raw.raft.term,
                role
            );
        }
        if role == StateRole::Leader {
            if self.leader_since.is_none() {
                self.leader_since = Some(self.raw.raft.raft_log.last_index());
                self.stamps.clear();
            }
        } else if self.leader_since.take().is_some() {
            self.stamps.clear();
            self.admitted.clear();
            for (_, p) in std::mem::take(&mut self.held) {
                p.fail(ReplicaError::NotLeader {
                    leader: (leader != 0).then_some(leader),
                });
            }
        }
    }
}

/// A group's journal, opened and reconciled with the partition logs (a
/// data group's), with its last applied entry and its vote fence; the
/// commit index lowered to the last entry where the reconcile cut past it.
fn open_journal(s: &GroupSetup) -> Result<(Journal, u64, fence::Fence), GroupError> {
    let id = s.id;
    let jerr = |source| GroupError::Journal { group: id, source };
    let initial = ConfState::from((s.cluster.ids(), vec![]));
    let (mut journal, recovered) = Journal::open(&s.dir, &initial).map_err(jerr)?;
    tracing::info!(
        "group {id}: journal {} opened: {} entries after the snapshot at {}{}",
        s.dir.display(),
        recovered.entries,
        journal.snapshot_index(),
        recovered
            .cut
            .as_ref()
            .map(|c| format!("; cut {c}"))
            .unwrap_or_default()
    );
    if let Role::Data { shard, meta, .. } = &s.role {
        reconcile::reconcile(id, &mut journal, &s.engine, *shard, meta.as_ref())?
            .report(id, s.shared.groups.get(id as usize));
    }
    let fence = fence::Fence::new(journal.new_incarnation().map_err(jerr)?);
    if fence.is_on() {
        tracing::info!(
            "group {id}: this node's journal is new (a new cluster, or a wiped directory): it does not vote until it has caught up with a leader or a majority is known new as well"
        );
    }
    let mut applied = journal.snapshot_index();
    if let Role::Meta(sm) = &s.role {
        let sm_applied = sm.applied_index().min(journal.last_index());
        applied = applied.max(sm_applied);
    }
    // The commit index is persisted lazily (with an election's term or
    // vote), so it may name entries the reconcile just cut (a pointer
    // durable, its batch not: a power cut between the two). Those were
    // never acknowledged here, and raft-rs refuses a commit past the log:
    // lowered to the last entry, it is learnt again from the leader.
    let mut hs = journal.hard_state().clone();
    let commit = hs.commit.min(journal.last_index()).max(applied);
    if commit != hs.commit {
        hs.commit = commit;
        journal.set_hard_state(&hs).map_err(jerr)?;
    }
    Ok((journal, applied, fence))
}

/// Where a group's journal lives.
pub(crate) fn journal_dir(dir: &std::path::Path, group: u32) -> PathBuf {
    dir.join("replica").join(format!("group-{group}"))
}
