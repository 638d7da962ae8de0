//! The embedder's side: propose from any thread or runtime, learn who
//! leads.

use crate::command::{Command, Origin};
use crate::error::ReplicaError;
use crate::inbox::{Inbox, Proposal};
use crate::net::forward::{Answer, Forwarder, Job, Proposer, Reply, Request};
use crate::status::{GroupView, Shared};
use bytes::Bytes;
use corelog::{AppendAck, Batch};
use crossbeam_channel::Sender;
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A cheap, cloneable handle to a running replica.
#[derive(Debug, Clone)]
pub struct ReplicaHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) inboxes: Arc<Vec<Sender<Inbox>>>,
    /// The engine, whose placement names each partition's shard.
    pub(crate) engine: corelog::Handle,
    pub(crate) limits: corelog::Limits,
    /// Sends this node hands to the leader (`net/forward.rs`).
    pub(crate) forwarder: Arc<Forwarder>,
}

impl ReplicaHandle {
    /// The data group of `partition`: 1 + the shard the engine places it
    /// on (its `Placement`), so the group's applier, on that shard, calls
    /// the engine locally, and a snapshot of the group holds its shard's
    /// partitions (`snapshot.rs`). Every node must place alike.
    pub fn group_of(&self, partition: u64) -> u32 {
        1 + u32::try_from(self.engine.shard_of(partition)).unwrap_or(u32::MAX - 1)
    }

    fn submit<T>(
        &self,
        group: u32,
        make: impl FnOnce(oneshot::Sender<Result<T, ReplicaError>>) -> Proposal,
    ) -> impl Future<Output = Result<T, ReplicaError>> + Send + 'static
    where
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let sent = self
            .inboxes
            .get(group as usize)
            .map(|i| i.send(Inbox::Propose(make(tx))).is_ok())
            .unwrap_or(false);
        async move {
            if !sent {
                return Err(ReplicaError::Stopped);
            }
            rx.await.unwrap_or(Err(ReplicaError::Stopped))
        }
    }

    /// Admits a producer batch (every checksum, on the calling thread) and
    /// replicates it into `partition`: resolves once a majority holds it at
    /// the durable point and this node stored it, with the offset the
    /// leader stamped.
    pub fn append(&self, partition: u64, bytes: Bytes, origin: Origin) -> ReplicaReply<AppendAck> {
        ReplicaReply::new(self.append_as(partition, bytes, origin, false))
    }

    /// Like [`append`](Self::append), on a node that may not lead: a repeat
    /// of a send this node proposed (when it led) is answered with that
    /// send's outcome; anything else is refused with `NotLeader`, nothing
    /// stored.
    pub fn append_repeat(
        &self,
        partition: u64,
        bytes: Bytes,
        origin: Origin,
    ) -> ReplicaReply<AppendAck> {
        ReplicaReply::new(self.append_as(partition, bytes, origin, true))
    }

    /// Like [`append`](Self::append), on any node: where this node does
    /// not lead the partition's group, a repeat of a send it proposed is
    /// answered from it, and any other send is forwarded to the leader
    /// over the replica network (`net/forward.rs`) and answered with the
    /// leader's answer. `NotLeader` (nothing stored) when no leader is
    /// known or it cannot be reached; `NotCommitted` when the send reached
    /// it and its answer did not come back.
    pub fn append_or_forward(
        &self,
        partition: u64,
        bytes: Bytes,
        origin: Origin,
    ) -> ReplicaReply<AppendAck> {
        ReplicaReply::new({
            let me = self.shared.me;
            let leads = self.shared.leader_of(self.group_of(partition) as usize) == Some(me);
            let local = self.append_as(partition, bytes.clone(), origin, !leads);
            or_forwarded(me, self.forwarder.clone(), local, move |answer| Job {
                request: Request::Send {
                    partition,
                    origin,
                    batch: bytes,
                },
                answer: Answer::Send(answer),
            })
        })
    }

    fn append_as(
        &self,
        partition: u64,
        bytes: Bytes,
        origin: Origin,
        only_repeat: bool,
    ) -> impl Future<Output = Result<AppendAck, ReplicaError>> + Send + 'static {
        let admitted = Batch::admit(bytes, &self.limits);
        let submitted = admitted.map(move |batch| {
            self.submit(self.group_of(partition), move |reply| Proposal::Append {
                partition,
                batch,
                origin,
                only_repeat,
                reply,
            })
        });
        async move {
            match submitted {
                Ok(f) => f.await,
                Err(error) => Err(ReplicaError::Admission { partition, error }),
            }
        }
    }

    fn partition_cmd(
        &self,
        partition: u64,
        cmd: Command,
    ) -> impl Future<Output = Result<u64, ReplicaError>> + Send + 'static {
        self.submit(self.group_of(partition), move |reply| Proposal::Partition {
            cmd,
            reply,
        })
    }

    /// A store-offset or delete-offset command, proposed here (the
    /// leader's side of a forwarded one).
    pub(crate) fn offset_cmd(
        &self,
        cmd: Command,
    ) -> impl Future<Output = Result<u64, ReplicaError>> + Send + 'static {
        let partition = match cmd {
            Command::StoreOffset { partition, .. } | Command::DeleteOffset { partition, .. } => {
                partition
            }
            _ => 0,
        };
        self.partition_cmd(partition, cmd)
    }

    /// An offset command, forwarded to the leader when this node does not
    /// lead (as [`append_or_forward`](Self::append_or_forward) does).
    fn offset_or_forward(
        &self,
        cmd: Command,
    ) -> impl Future<Output = Result<u64, ReplicaError>> + Send + 'static {
        let me = self.shared.me;
        let local = self.offset_cmd(cmd.clone());
        or_forwarded(me, self.forwarder.clone(), local, move |answer| Job {
            request: Request::Offset(cmd),
            answer: Answer::Count(answer),
        })
    }

    /// Replicates a consumer's offset (through the leader, forwarded there
    /// when this node does not lead).
    pub fn store_offset(&self, partition: u64, consumer: u64, offset: u64) -> ReplicaReply<()> {
        ReplicaReply::new({
            let f = self.offset_or_forward(Command::StoreOffset {
                partition,
                consumer,
                offset,
            });
            async move { f.await.map(|_| ()) }
        })
    }

    /// Forgets a consumer's offset on every node (through the leader,
    /// forwarded there when this node does not lead); resolves to whether
    /// the leader had one.
    pub fn delete_offset(&self, partition: u64, consumer: u64) -> ReplicaReply<bool> {
        ReplicaReply::new({
            let f = self.offset_or_forward(Command::DeleteOffset {
                partition,
                consumer,
            });
            async move { f.await.map(|n| n > 0) }
        })
    }

    /// Deletes the oldest `count` sealed segments of `partition` on every
    /// node (segments end at the same offsets everywhere: the same bytes,
    /// the same segment size); resolves to how many the leader deleted.
    pub fn delete_segments(&self, partition: u64, count: usize) -> ReplicaReply<usize> {
        ReplicaReply::new({
            let f = self.partition_cmd(
                partition,
                Command::DeleteSegments {
                    partition,
                    count: count as u64,
                },
            );
            async move { f.await.map(|n| usize::try_from(n).unwrap_or(usize::MAX)) }
        })
    }

    /// Replicates that the store's manifest for `partition` holds every
    /// offset below `end` (the tier's commit, `TierLeadership`); proposed
    /// here, never forwarded: only the leader commits manifests. The
    /// proposal is made before this returns; the reply says whether it
    /// was applied here.
    pub(crate) fn offloaded(&self, partition: u64, end: u64) -> ReplicaReply<()> {
        ReplicaReply::new({
            let f = self.partition_cmd(partition, Command::Offloaded { partition, end });
            async move { f.await.map(|_| ()) }
        })
    }

    /// Replicates a metadata change the embedder made from its metadata as
    /// of `base` (its [`crate::MetaMachine::version`]): resolves once applied
    /// here; [`ReplicaError::Conflict`] when the metadata moved since.
    pub fn propose_meta(&self, base: u64, data: Bytes) -> ReplicaReply<()> {
        ReplicaReply::new({
            let f = self.submit(0, move |reply| Proposal::Meta { base, data, reply });
            async move { f.await.map(|_| ()) }
        })
    }

    /// Requests (sends, offset changes) this node has forwarded to a
    /// leader since it started.
    pub fn forwarded(&self) -> u64 {
        self.forwarder
            .forwarded
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// This node's id.
    pub fn me(&self) -> u64 {
        self.shared.me
    }

    /// The cluster's leader: the metadata group's, which every data group
    /// follows. `None` during an election, and on a leader no majority has
    /// answered within an election timeout (it may have been replaced).
    pub fn leader(&self) -> Option<u64> {
        let l = self.shared.leader_of(0)?;
        // Itself only while a majority confirms it (`group/lease.rs`): a
        // leader that was paused may already have been replaced.
        (l != self.shared.me || self.shared.confirmed_leader(0)).then_some(l)
    }

    /// Whether this node leads the metadata group and every data group.
    pub fn leads_all(&self) -> bool {
        (0..self.inboxes.len()).all(|g| self.shared.leader_of(g) == Some(self.shared.me))
    }

    /// Every group's state as this node sees it.
    pub fn status(&self) -> Vec<GroupView> {
        self.shared.views()
    }
}

/// `local`'s answer, unless it says another node leads: then that node's
/// answer to the request `job` makes, forwarded (`net/forward.rs`). A
/// request dropped unanswered may have been sent: "not committed".
async fn or_forwarded<T>(
    me: u64,
    forwarder: Arc<Forwarder>,
    local: impl Future<Output = Result<T, ReplicaError>>,
    job: impl FnOnce(oneshot::Sender<Result<T, ReplicaError>>) -> Job,
) -> Result<T, ReplicaError> {
    match local.await {
        Err(ReplicaError::NotLeader { leader: Some(l) }) if l != me => {
            let (answer, rx) = oneshot::channel();
            forwarder.forward(l, job(answer));
            rx.await.unwrap_or(Err(ReplicaError::NotCommitted))
        }
        other => other,
    }
}

/// The leader's side of a forwarded send or offset command: proposed here
/// as its client's.
impl Proposer for ReplicaHandle {
    fn append(&self, partition: u64, batch: Bytes, origin: Origin) -> Reply<AppendAck> {
        Box::pin(ReplicaHandle::append(self, partition, batch, origin))
    }

    fn offset_cmd(&self, cmd: Command) -> Reply<u64> {
        Box::pin(ReplicaHandle::offset_cmd(self, cmd))
    }
}

/// The answer to a request made through a [`ReplicaHandle`]: a future
/// for async callers, [`ReplicaReply::wait`] for a plain thread. The
/// request is on its way when the call that made the reply returns;
/// dropping the reply discards the answer, not the request.
#[must_use = "a reply does nothing unless awaited or waited on (the request itself is already on its way)"]
pub struct ReplicaReply<T> {
    fut: Pin<Box<dyn Future<Output = Result<T, ReplicaError>> + Send + 'static>>,
}

impl<T> ReplicaReply<T> {
    fn new(fut: impl Future<Output = Result<T, ReplicaError>> + Send + 'static) -> Self {
        ReplicaReply { fut: Box::pin(fut) }
    }

    /// Blocks this thread until the answer comes.
    ///
    /// ```no_run
    /// # fn f(h: corelog_replica::ReplicaHandle, batch: bytes::Bytes, origin: corelog_replica::Origin) {
    /// let ack = h.append(1, batch, origin).wait();
    /// # }
    /// ```
    pub fn wait(self) -> Result<T, ReplicaError> {
        crate::block_on::block_on(self)
    }
}

impl<T> Future for ReplicaReply<T> {
    type Output = Result<T, ReplicaError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.fut.as_mut().poll(cx)
    }
}

impl<T> std::fmt::Debug for ReplicaReply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplicaReply")
    }
}
