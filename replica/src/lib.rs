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
mod block_on;
mod command;
pub mod config;
mod error;
mod group;
mod handle;
mod inbox;
/// The Raft log on disk: public only with the `journal` feature (tests and
/// the journal power-cut tool read its records and files).
#[cfg(feature = "journal")]
pub mod journal;
#[cfg(not(feature = "journal"))]
mod journal;
mod machine;
mod net;
mod slog_drain;
mod status;
mod tier_leadership;

pub use command::Origin;
pub use config::{ClusterConfig, ConfigError, Inconsistency, NodeAddr, ReplicaOptions, Secret};
pub use error::{GroupError, RaftError, ReplicaError, StartError};
pub use handle::{ReplicaHandle, ReplicaReply};
pub use machine::{MachineError, MetaMachine};
/// For tests: links between running nodes cut (`testing` feature).
#[cfg(feature = "testing")]
pub use net::cut as link_cut;
/// For the cluster simulation (`testing` feature): a wiped node's fence and
/// the guard for a peer that lost its journal, the decisions the data
/// groups make, run there on the simulation's own nodes.
#[cfg(feature = "testing")]
pub mod wiped {
    pub use crate::group::fence::{Admit, Fence};
    pub use crate::group::lost_journal::guard as guard_lost_journal;
}
/// For tests: fetches from a peer held back (`testing` feature).
#[cfg(feature = "testing")]
pub use net::fetch::hold as fetch_hold;
pub use status::{AtOpen, GroupView};
pub use tier_leadership::TierLeadership;

use group::{Group, GroupSetup, Role};
use inbox::Inbox;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
        let node = checked_node(&engine, &cluster, me)?;
        let listener = listen(node.replica)?;
        let groups = cluster.shards + 1;
        let shared = Arc::new(status::Shared::new(me, groups));
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..groups)
            .map(|_| crossbeam_channel::unbounded::<Inbox>())
            .unzip();
        let stop = Arc::new(AtomicBool::new(false));
        let peers = peers_of(&cluster, me);
        let key = net::auth::Key::of(cluster.secret.as_ref());
        let (forwarder, mut threads) =
            net::forward::Forwarder::start(&peers, me, node.replica.ip(), &key, &stop)
                .map_err(thread_err("forwarder"))?;
        let handle = ReplicaHandle {
            shared: shared.clone(),
            inboxes: Arc::new(txs.clone()),
            engine: engine.clone(),
            limits: engine.limits(),
            forwarder: Arc::new(forwarder),
        };
        let receivers = net::Receivers {
            inboxes: txs.clone(),
            engine: engine.clone(),
            handle: Arc::new(handle.clone()),
            me,
            data_groups: cluster.shards as u32,
            key,
            local: node.replica.ip(),
            shared: shared.clone(),
        };
        let (transport, net_threads) = net::start(listener, &peers, receivers, stop.clone())
            .map_err(thread_err("replica network"))?;
        threads.extend(net_threads);
        let mut replica = Replica {
            handle,
            threads,
            stop,
        };
        replica.start_groups(rxs, |g, inbox| {
            Ok(GroupSetup {
                id: g,
                dir: group::journal_dir(&dir, g),
                role: role_of(g, &engine, &meta, &txs)?,
                inbox,
                inbox_tx: txs[g as usize].clone(),
                transport: transport.clone(),
                shared: shared.clone(),
                engine: engine.clone(),
                cluster: cluster.clone(),
                opts: options.clone(),
            })
        })?;
        tracing::info!(
            "replica: node {me} of {:?}, {} data groups, peers on {}",
            cluster.ids(),
            cluster.shards,
            node.replica
        );
        Ok(replica)
    }

    /// Starts a thread per group (each with the inbox of `rxs` at its
    /// index, set up by `setup`) and waits until each has opened its
    /// journal; stops them all when one could not.
    fn start_groups(
        &mut self,
        rxs: Vec<crossbeam_channel::Receiver<Inbox>>,
        setup: impl Fn(u32, crossbeam_channel::Receiver<Inbox>) -> Result<GroupSetup, StartError>,
    ) -> Result<(), StartError> {
        let groups = rxs.len();
        let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
        for (g, inbox) in rxs.into_iter().enumerate() {
            let s = setup(g as u32, inbox)?;
            self.threads.push(spawn_group(s, ready_tx.clone())?);
        }
        self.wait_ready(&ready_rx, groups)
    }

    /// Waits until each of the `groups` has opened its journal; stops them
    /// all when one could not.
    fn wait_ready(
        &mut self,
        ready: &crossbeam_channel::Receiver<Result<(), GroupError>>,
        groups: usize,
    ) -> Result<(), StartError> {
        for _ in 0..groups {
            let failed = match ready.recv() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e.into(),
                Err(_) => StartError::GroupThreadEnded,
            };
            self.stop_threads();
            return Err(failed);
        }
        Ok(())
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

/// This node's addresses, once the engine and the cluster file agree on
/// the shard count (a data group per shard index); warns when the replica
/// port is open to anyone.
fn checked_node(
    engine: &corelog::Handle,
    cluster: &ClusterConfig,
    me: u64,
) -> Result<NodeAddr, StartError> {
    let node = cluster.node(me).ok_or(StartError::UnknownNode(me))?.clone();
    if engine.shards() != cluster.shards {
        return Err(StartError::Shards {
            engine: engine.shards(),
            cluster: cluster.shards,
        });
    }
    if cluster.secret.is_none() {
        tracing::warn!(
            "replica port {}: the cluster file names no secret_file: anyone who reaches this port can act as a peer",
            node.replica
        );
    }
    Ok(node)
}

/// Group `g`'s role: the metadata machine (group 0), or a data group with
/// its applier on shard `g - 1`.
fn role_of(
    g: u32,
    engine: &corelog::Handle,
    meta: &Arc<dyn MetaMachine>,
    inboxes: &[crossbeam_channel::Sender<Inbox>],
) -> Result<Role, StartError> {
    if g == 0 {
        return Ok(Role::Meta(meta.clone()));
    }
    let shard = g as usize - 1;
    let applier = apply::start(engine, shard, g, inboxes[g as usize].clone()).map_err(|e| {
        StartError::Applier {
            group: g,
            source: Box::new(e),
        }
    })?;
    Ok(Role::Data {
        shard,
        applier,
        meta: meta.clone(),
    })
}

/// This node's replica port, bound.
fn listen(addr: std::net::SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr).map_err(|source| StartError::Listen { addr, source })
}

/// The other nodes: id and replica address.
fn peers_of(cluster: &ClusterConfig, me: u64) -> Vec<(u64, std::net::SocketAddr)> {
    cluster
        .nodes
        .iter()
        .filter(|n| n.id != me)
        .map(|n| (n.id, n.replica))
        .collect()
}

/// A thread `what` could not be started.
fn thread_err(what: &'static str) -> impl Fn(std::io::Error) -> StartError {
    move |source| StartError::Thread { what, source }
}

/// Opens a group; a panic while opening (raft-rs's assertions on the
/// recovered state) is an error, so the node's start says so instead of
/// waiting for a group that will never answer.
fn open_group(setup: GroupSetup) -> Result<Group, GroupError> {
    let g = setup.id;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Group::open(setup))).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            Err(GroupError::OpenPanicked { group: g, what })
        },
    )
}

/// Opens and runs a group on its own thread, saying on `ready` whether its
/// journal opened. A panic in its loop stops that group alone, logged.
fn spawn_group(
    setup: GroupSetup,
    ready: crossbeam_channel::Sender<Result<(), GroupError>>,
) -> Result<std::thread::JoinHandle<()>, StartError> {
    let g = setup.id;
    std::thread::Builder::new()
        .name(format!("replica-g{g}"))
        .spawn(move || match open_group(setup) {
            Ok(group) => {
                let _ = ready.send(Ok(()));
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group.run()));
                if run.is_err() {
                    tracing::error!(
                        "group {g} stopped on this node: its loop panicked (see above); restart the node"
                    );
                }
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        })
        .map_err(|source| StartError::Thread {
            what: "group",
            source,
        })
}
