//! # corelog-replica
//!
//! corelog's partitions replicated over a cluster of nodes by Raft, with
//! TiKV's raft-rs (`raft` 0.7.0) as the consensus library: this crate
//! writes its storage (the journal), its network (plain TCP, framed), and
//! the loop that drives it; raft-rs decides elections, terms, matching and
//! commitment.
//!
//! - **Groups.** One Raft group for metadata (group 0: the embedder's
//!   bytes, applied by its [`MetaMachine`]) and one per shard index (group
//!   `1 + s` holds the partitions on shard `s` of every node), so the number
//!   of groups follows the cores, not the partitions. Every data group's
//!   leadership is handed to the metadata group's leader: one node leads
//!   everything, and clients go there.
//! - **The path of a send.** The leader admits the batch (every checksum),
//!   stamps it (offset, timestamp) and proposes the stamped bytes; each
//!   node appends the entry to its group's journal and, under `sync`,
//!   fdatasyncs it before saying it holds it; once a majority holds it the
//!   entry is committed and every node applies it with the engine's
//!   `append_stamped`, on the owning shard: replicas store the leader's
//!   bytes verbatim, never re-stamped. The send is answered when the
//!   leader has stored it.
//! - **Written twice.** A batch is written to the journal (the durable
//!   point) and to its partition log (where polls read it, without
//!   fsync: the journal keeps it until a compaction, which first flushes
//!   the partitions).
//! - **Restarts** replay the journal from its snapshot; a batch already
//!   stored is recognised by its offset. A node too far behind, or with a
//!   wiped directory, gets a snapshot and fetches the partitions' batches
//!   from the leader.

#![warn(missing_docs)]
// raft-rs's protobuf types are built field by field, as its own examples do.
#![allow(clippy::field_reassign_with_default)]

mod apply;
mod command;
pub mod config;
mod group;
mod handle;
pub mod journal;
mod log;
mod net;
mod status;

pub use config::{ClusterConfig, ConfigError, NodeAddr, ReplicaOptions};
pub use group::GroupError;
pub use handle::{Origin, ReplicaHandle};
pub use status::GroupView;

use bytes::Bytes;
use group::{Group, GroupSetup, Inbox, Role};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The embedder's metadata as a replicated state machine (group 0).
///
/// Changes are proposed as opaque bytes computed from the metadata as of
/// [`version`](MetaMachine::version); every node applies them in log order.
pub trait MetaMachine: Send + Sync + 'static {
    /// The index of the last metadata entry applied, as recorded durably
    /// (entries up to it are not applied again after a restart).
    fn applied_index(&self) -> u64;
    /// The version changes are computed from: the index of the last entry
    /// that took effect.
    fn version(&self) -> u64;
    /// Applies entry `index`, a change made from version `base`, durably.
    /// When the version is no longer `base` it changes nothing and returns
    /// `false` (the proposer is told [`ReplicaError::Conflict`]).
    fn apply(&self, index: u64, base: u64, data: &[u8]) -> Result<bool, String>;
    /// The metadata as of [`applied_index`](MetaMachine::applied_index).
    fn snapshot(&self) -> Bytes;
    /// Replaces the metadata with a snapshot's, taken at `index`.
    fn restore(&self, index: u64, data: &[u8]) -> Result<(), String>;
    /// Whether entries for `partition` still apply (false once the
    /// metadata deleted it, so a late entry cannot bring it back).
    fn keeps(&self, partition: u64) -> bool;
}

/// Why a replicated request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaError {
    /// This node does not lead the group: nothing was stored; send it to
    /// the leader.
    #[error("this node does not lead (leader: {leader:?}); nothing was stored")]
    NotLeader {
        /// the leader, if known
        leader: Option<u64>,
    },
    /// The outcome is unknown: the entry may still commit (a leader change
    /// or a timeout came first).
    #[error("not committed in time: the outcome is unknown")]
    NotCommitted,
    /// A metadata change made from an older version; nothing changed.
    #[error("the metadata changed meanwhile; nothing was applied")]
    Conflict,
    /// The batch was refused at admission; nothing was stored.
    #[error("partition {partition}: batch refused: {error}")]
    Admission {
        /// the partition
        partition: u64,
        /// why
        error: corelog::BatchError,
    },
    /// The committed entry could not be stored here.
    #[error("applying: {0}")]
    Apply(String),
    /// The replica is stopping.
    #[error("the replica is stopping")]
    Stopped,
}

/// Why a replica cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// This node is not in the cluster file.
    #[error("node {0} is not in the cluster file")]
    UnknownNode(u64),
    /// The engine's shards differ from the cluster's data groups.
    #[error("the engine runs {engine} shards, the cluster {cluster} data groups (set the same)")]
    Shards {
        /// the engine's
        engine: usize,
        /// the cluster file's
        cluster: usize,
    },
    /// The replica port.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// the address
        addr: std::net::SocketAddr,
        /// the error
        source: std::io::Error,
    },
    /// A thread or the applier.
    #[error("start: {0}")]
    Spawn(String),
    /// A group could not open.
    #[error(transparent)]
    Group(#[from] GroupError),
}

/// What a replica needs.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// The data directory (journals go to `DIR/replica/group-<g>/`).
    pub dir: PathBuf,
    /// This node's id.
    pub me: u64,
    /// Every node.
    pub cluster: ClusterConfig,
    /// Timing and durability.
    pub options: ReplicaOptions,
}

/// A running replica: its groups' threads and the network's.
#[derive(Debug)]
pub struct Replica {
    handle: ReplicaHandle,
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Replica {
    /// Opens every group's journal and starts the groups and the network
    /// over a running engine. A new node records the cluster file's nodes
    /// as the initial membership (once); the groups elect leaders once a
    /// majority of nodes is up.
    pub fn start(
        engine: corelog::Handle,
        config: ReplicaConfig,
        meta: Arc<dyn MetaMachine>,
    ) -> Result<Replica, StartError> {
        let ReplicaConfig {
            dir,
            me,
            cluster,
            options,
        } = config;
        let node = cluster.node(me).ok_or(StartError::UnknownNode(me))?.clone();
        if engine.shards() != cluster.shards {
            return Err(StartError::Shards {
                engine: engine.shards(),
                cluster: cluster.shards,
            });
        }
        let listener = TcpListener::bind(node.replica).map_err(|source| StartError::Listen {
            addr: node.replica,
            source,
        })?;
        let groups = cluster.shards + 1;
        let shared = Arc::new(status::Shared::new(me, groups));
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..groups)
            .map(|_| crossbeam_channel::unbounded::<Inbox>())
            .unzip();
        let stop = Arc::new(AtomicBool::new(false));
        let peers: Vec<_> = cluster
            .nodes
            .iter()
            .filter(|n| n.id != me)
            .map(|n| (n.id, n.replica))
            .collect();
        let receivers = net::Receivers {
            inboxes: txs.clone(),
            engine: engine.clone(),
            me,
            data_groups: cluster.shards as u32,
            local: node.replica.ip(),
        };
        let (transport, mut threads) = net::start(listener, &peers, receivers, stop.clone())
            .map_err(|e| StartError::Spawn(e.to_string()))?;
        let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
        for (g, inbox) in rxs.into_iter().enumerate() {
            let g = g as u32;
            let role = if g == 0 {
                Role::Meta(meta.clone())
            } else {
                let shard = g as usize - 1;
                let applier = apply::start(&engine, shard, g, txs[g as usize].clone())
                    .map_err(|e| StartError::Spawn(e.to_string()))?;
                Role::Data {
                    shard,
                    applier,
                    meta: meta.clone(),
                }
            };
            let setup = GroupSetup {
                id: g,
                dir: group::journal_dir(&dir, g),
                role,
                inbox,
                inbox_tx: txs[g as usize].clone(),
                transport: transport.clone(),
                shared: shared.clone(),
                engine: engine.clone(),
                cluster: cluster.clone(),
                opts: options.clone(),
            };
            let ready = ready_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("replica-g{g}"))
                .spawn(move || match Group::open(setup) {
                    Ok(group) => {
                        let _ = ready.send(Ok(()));
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group.run()));
                        if run.is_err() {
                            tracing::error!("group {g} stopped on this node: its loop panicked (see above); restart the node");
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                })
                .map_err(|e| StartError::Spawn(e.to_string()))?;
            threads.push(t);
        }
        let handle = ReplicaHandle {
            shared,
            inboxes: Arc::new(txs),
            shards: cluster.shards,
            limits: engine.limits(),
        };
        let mut replica = Replica {
            handle,
            threads,
            stop,
        };
        for _ in 0..groups {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    replica.stop_threads();
                    return Err(e.into());
                }
                Err(_) => {
                    replica.stop_threads();
                    return Err(StartError::Spawn("a group thread ended".into()));
                }
            }
        }
        tracing::info!(
            "replica: node {me} of {:?}, {} data groups, peers on {}",
            cluster.ids(),
            cluster.shards,
            node.replica
        );
        Ok(replica)
    }

    /// The handle.
    pub fn handle(&self) -> ReplicaHandle {
        self.handle.clone()
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for inbox in self.handle.inboxes.iter() {
            let _ = inbox.send(Inbox::Stop);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Stops the groups (syncing their journals) and the network. Call it
    /// before the engine's shutdown.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Where node data lives under a data directory (for tools).
pub fn replica_dir(dir: &Path) -> PathBuf {
    dir.join("replica")
}
