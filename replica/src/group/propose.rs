//! Proposals: the leader stamps a send (its partition's next offset and a
//! timestamp never going back) and proposes the stamped bytes; every
//! replica stores exactly those bytes. A new leader first applies what its
//! predecessors committed (its own empty entry marks the point), so the
//! offsets it stamps continue what is stored.

use super::repeats::{Repeat, SendId};
use super::{Awaited, Group, Role, Waiter};
use crate::command::Command;
use crate::error::ReplicaError;
use crate::inbox::{Inbox, Proposal};
use bytes::Bytes;
use corelog::{RequestError, Stamp};
use raft::eraftpb::{Entry, Message, MessageType};
use std::time::Instant;

/// Microseconds since the Unix epoch.
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl Group {
    /// Whether this leader has applied everything before its term.
    fn caught_up(&self) -> bool {
        self.leader_since.is_some_and(|s| self.applied >= s)
    }

    pub(super) fn propose(&mut self, p: Proposal) {
        let Some(p) = self.answer_repeat(p) else {
            return;
        };
        if !self.is_leader() {
            p.fail(ReplicaError::NotLeader {
                leader: self.leader(),
            });
            return;
        }
        // Behind the sends already waiting, in order.
        self.held.push_back((Instant::now(), p));
        self.release_held();
    }

    /// Proposes `p`, or gives it back when it must wait: for this leader
    /// to apply its predecessors' entries, or for its partition's stamp
    /// (`stamps.rs`).
    fn try_propose(&mut self, p: Proposal) -> Result<(), Proposal> {
        if !self.caught_up() {
            return Err(p);
        }
        if let Proposal::Append { partition, .. } = &p {
            if !self.stamps.has(*partition) {
                self.ask_stamp(*partition);
                return Err(p);
            }
        }
        let Some(entry) = self.entry_of(p) else {
            return Ok(());
        };
        let term = self.raw.raft.term;
        let before = self.raw.raft.raft_log.last_index();
        match self.step_proposal(entry.context, entry.data) {
            Ok(()) if self.raw.raft.raft_log.last_index() > before => {
                let index = self.raw.raft.raft_log.last_index();
                if let Some((client, send)) = entry.sent_by {
                    self.clients.proposed(client, send, index, term);
                }
                if let Some(batch) = entry.admitted {
                    self.admitted.insert(index, (term, batch));
                }
                self.waiters.insert(
                    index,
                    Awaited {
                        term,
                        deadline: Instant::now() + self.opts.commit_timeout,
                        waiter: entry.waiter,
                    },
                );
            }
            Ok(()) | Err(_) => {
                // Dropped (a leadership transfer in progress, or the
                // uncommitted log is full): nothing was appended, and the
                // stamp taken is not used.
                self.resync();
                entry.waiter.fail(ReplicaError::NotLeader {
                    leader: self.leader(),
                });
            }
        }
        Ok(())
    }

    /// The entry a proposal becomes: a send stamped with its partition's
    /// next offset and a timestamp never going back (`None`, answered, when
    /// the partition's end cannot be read).
    fn entry_of(&mut self, p: Proposal) -> Option<NewEntry> {
        let (context, data, waiter) = match p {
            Proposal::Append {
                partition,
                mut batch,
                origin,
                reply,
                ..
            } => {
                let send = SendId {
                    session: origin.session,
                    request: origin.request,
                    batch: batch.identity(),
                };
                let (next, last_ts) = match self.stamps.take(partition) {
                    Some(Ok(s)) => s,
                    Some(Err(e)) => {
                        let _ = reply.send(Err(ReplicaError::Stamp(Box::new(e))));
                        return None;
                    }
                    // `try_propose` proposes only once the stamp is read;
                    // refused, nothing stored, rather than stamped wrong.
                    None => {
                        let _ = reply.send(Err(ReplicaError::NotLeader {
                            leader: self.leader(),
                        }));
                        return None;
                    }
                };
                let ts = now_micros().max(last_ts);
                let count = u64::from(batch.as_ref().message_count());
                let stamped = batch.stamp(Stamp {
                    partition_id: partition,
                    base_offset: next,
                    base_timestamp: ts,
                });
                self.stamps.insert(partition, next + count, ts);
                let cmd = Command::Append {
                    partition,
                    client: origin.client,
                    request: origin.request,
                };
                return Some(NewEntry {
                    context: cmd.encode(),
                    data: stamped.bytes().clone(),
                    waiter: Waiter::Append(reply),
                    sent_by: Some((origin.client, send)),
                    admitted: Some(stamped),
                });
            }
            Proposal::Partition { cmd, reply } => {
                (cmd.encode(), Bytes::new(), Waiter::Count(reply))
            }
            Proposal::Meta { base, data, reply } => {
                (Command::Meta { base }.encode(), data, Waiter::Meta(reply))
            }
        };
        Some(NewEntry {
            context,
            data,
            waiter,
            sent_by: None,
            admitted: None,
        })
    }

    /// `RawNode::propose`, with the entry's data as `Bytes`: the stamped
    /// batch goes into the log as it is, not copied into a `Vec`.
    fn step_proposal(&mut self, context: Vec<u8>, data: Bytes) -> raft::Result<()> {
        let mut e = Entry::default();
        e.data = data;
        e.context = context.into();
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgPropose);
        m.from = self.raw.raft.id;
        m.set_entries(vec![e].into());
        self.raw.raft.step(m)
    }

    /// Answers a repeated send from the first one (see `repeats.rs`);
    /// returns the proposal if it is not a repeat. A send that may only be
    /// a repeat (this node does not lead every group) and is not one is
    /// refused.
    fn answer_repeat(&mut self, mut p: Proposal) -> Option<Proposal> {
        let Proposal::Append {
            origin,
            only_repeat,
            batch,
            ..
        } = &mut p
        else {
            return Some(p);
        };
        let send = SendId {
            session: origin.session,
            request: origin.request,
            batch: batch.identity(),
        };
        let repeat = self.clients.check(origin.client, send);
        if repeat == Repeat::New && !*only_repeat {
            return Some(p);
        }
        let Proposal::Append { reply, .. } = p else {
            return None;
        };
        match repeat {
            Repeat::Stored(ack) => {
                let _ = reply.send(Ok(ack));
            }
            Repeat::Pending { index, term } => {
                tracing::debug!("group {}: a repeated send waits for entry {index}", self.id);
                let pending = Awaited {
                    term,
                    deadline: Instant::now() + self.opts.commit_timeout,
                    waiter: Waiter::Append(reply),
                };
                if let Some(earlier) = self.waiters.insert(index, pending) {
                    earlier.waiter.fail(ReplicaError::NotCommitted);
                }
            }
            Repeat::New => {
                let _ = reply.send(Err(ReplicaError::NotLeader {
                    leader: self.leader(),
                }));
            }
        }
        None
    }

    /// Forgets the stamps and waits until everything proposed so far is
    /// applied before stamping again: the engine's ends are then exact.
    pub(super) fn resync(&mut self) {
        self.stamps.clear();
        if self.leader_since.is_some() {
            self.leader_since = Some(self.raw.raft.raft_log.last_index());
        }
    }

    /// Proposes what waited, in order, until one must wait again.
    pub(super) fn release_held(&mut self) {
        while let Some((t, p)) = self.held.pop_front() {
            if let Err(p) = self.try_propose(p) {
                self.held.push_front((t, p));
                break;
            }
        }
    }

    /// Reads `partition`'s stamp on its shard, unless a read is under way;
    /// the answer comes as `Inbox::Stamped` ([`Group::on_stamped`]).
    fn ask_stamp(&mut self, partition: u64) {
        if !self.stamps.ask(partition, Instant::now()) {
            return;
        }
        let epoch = self.stamps.epoch();
        let Role::Data { shard, .. } = &self.role else {
            self.stamps.answered(partition, epoch, Ok((0, 0)));
            return;
        };
        let (engine, inbox) = (self.engine.clone(), self.inbox_tx.clone());
        // Sent unless the shard's queue is full; then it is asked again
        // after a while (`stamps.rs`).
        drop(self.engine.spawn_on(*shard, move || async move {
            let result = match engine.stats(partition).await {
                Ok(s) => Ok((s.end_offset, s.last_timestamp)),
                Err(RequestError::UnknownPartition { .. }) => Ok((0, 0)),
                Err(e) => Err(e),
            };
            let _ = inbox.send(Inbox::Stamped {
                partition,
                epoch,
                result,
            });
        }));
    }

    /// A stamp read on the shard: kept unless stale, and the sends that
    /// waited for it proposed.
    pub(super) fn on_stamped(
        &mut self,
        partition: u64,
        epoch: u64,
        result: Result<(u64, u64), RequestError>,
    ) {
        self.stamps.answered(partition, epoch, result);
        self.release_held();
    }
}

/// A proposal as the entry it becomes, with who waits for it.
struct NewEntry {
    context: Vec<u8>,
    data: Bytes,
    waiter: Waiter,
    /// A send's client and identity, for the repeat table.
    sent_by: Option<(u128, SendId)>,
    /// A send's stamped batch, admitted (not checked again when written).
    admitted: Option<corelog::Batch>,
}
