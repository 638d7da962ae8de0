//! corelog-server in a cluster (`--node ID --cluster FILE`): the catalog as
//! the metadata group's state machine, and what clients are told about the
//! nodes.
//!
//! A catalog change is made on the leader from its catalog (the closure of
//! `Context::update_catalog`), then replicated whole: every node applies
//! the new catalog in log order, persists it (with the entry's index, so a
//! restart does not apply it again), and creates or deletes the engine
//! partitions the change added or removed. Partition ids are never reused,
//! and the catalog lists the dropped ones, so a late entry for a deleted
//! partition is recognised and dropped (a data group and the metadata
//! group apply in their own orders: a send may be applied before the topic
//! that holds its partition, or after the topic is gone).

use crate::catalog::model::Catalog;
use crate::catalog::store::{decode_body, encode_body, MetadataError, MetadataStore};
use bytes::Bytes;
use corelog_replica::{ClusterConfig, MachineError, MetaMachine, ReplicaHandle};
use iggy_binary_protocol::responses::system::get_cluster_metadata::{
    ClusterMetadataResponse, ClusterNodeResponse,
};
use iggy_common::{ClusterNodeRole, ClusterNodeStatus};
use std::collections::HashSet;
use std::sync::Arc;

/// Why a replicated catalog change could not be applied on this node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The entry's or snapshot's body is not a catalog.
    #[error("the replicated catalog does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// The catalog file could not be written.
    #[error(transparent)]
    Write(#[from] MetadataError),
    /// The engine could not list its partitions.
    #[error("list the engine's partitions: {0}")]
    List(corelog::RequestError),
    /// A partition the catalog holds could not be created.
    #[error("create partition {partition}: {source}")]
    Create {
        /// the partition
        partition: u64,
        /// the engine's error
        source: corelog::RequestError,
    },
    /// A partition the catalog dropped could not be deleted.
    #[error("delete partition {partition}: {source}")]
    Delete {
        /// the partition
        partition: u64,
        /// the engine's error
        source: corelog::RequestError,
    },
}

/// The catalog as the metadata group's state machine.
#[derive(Debug)]
pub struct CatalogMachine {
    /// The catalog.
    pub metadata: Arc<MetadataStore>,
    /// The engine whose partitions follow the catalog.
    pub engine: corelog::Handle,
}

impl CatalogMachine {
    /// Creates the partitions `next` holds and the engine does not, and
    /// deletes those a change dropped (and any a late send brought back).
    fn reconcile(&self, next: &Catalog) -> Result<(), ApplyError> {
        let held: HashSet<u64> = next.all_partitions().collect();
        let present: HashSet<u64> = self
            .engine
            .partitions()
            .wait()
            .map_err(ApplyError::List)?
            .into_iter()
            .collect();
        for p in held.difference(&present) {
            self.engine
                .create_partition(*p)
                .wait()
                .map_err(|source| ApplyError::Create {
                    partition: *p,
                    source,
                })?;
        }
        for p in &present {
            if next.deleted_partitions.binary_search(p).is_ok() {
                tracing::info!("deleting partition {p}: the catalog dropped it");
                self.engine
                    .delete_partition(*p)
                    .wait()
                    .map_err(|source| ApplyError::Delete {
                        partition: *p,
                        source,
                    })?;
            }
        }
        Ok(())
    }
}

/// `next` with `deleted_partitions` = what `prev` had deleted, plus what
/// `prev` held and `next` does not.
fn with_drops(prev: &Catalog, mut next: Catalog) -> Catalog {
    let held: HashSet<u64> = next.all_partitions().collect();
    let mut deleted: Vec<u64> = prev.deleted_partitions.clone();
    deleted.extend(prev.all_partitions().filter(|p| !held.contains(p)));
    deleted.sort_unstable();
    deleted.dedup();
    next.deleted_partitions = deleted;
    next
}

impl MetaMachine for CatalogMachine {
    fn applied_index(&self) -> u64 {
        self.metadata.snapshot().replica_applied
    }

    fn version(&self) -> u64 {
        self.metadata.snapshot().replica_version
    }

    fn apply(&self, index: u64, base: u64, data: &[u8]) -> Result<bool, MachineError> {
        let current = self.metadata.snapshot();
        if index <= current.replica_applied {
            return Ok(true);
        }
        if current.replica_version != base {
            return Ok(false);
        }
        let mut next = with_drops(&current, decode_body(data).map_err(ApplyError::from)?);
        next.replica_applied = index;
        next.replica_version = index;
        self.metadata
            .replace(next.clone())
            .map_err(ApplyError::from)?;
        self.reconcile(&next)?;
        Ok(true)
    }

    fn snapshot(&self) -> Bytes {
        Bytes::from(encode_body(&self.metadata.snapshot()))
    }

    fn restore(&self, index: u64, data: &[u8]) -> Result<(), MachineError> {
        let mut next = decode_body(data).map_err(ApplyError::from)?;
        next.replica_applied = next.replica_applied.max(index);
        self.metadata
            .replace(next.clone())
            .map_err(ApplyError::from)?;
        tracing::info!("catalog restored from a snapshot at entry {index}");
        Ok(self.reconcile(&next)?)
    }

    fn keeps(&self, partition: u64) -> bool {
        self.metadata
            .snapshot()
            .deleted_partitions
            .binary_search(&partition)
            .is_err()
    }
}

/// What `GET_CLUSTER_METADATA` says in a cluster: every node, the leader
/// (the one leading every group, as this node sees it) healthy and
/// marked, the others followers. Every node names the same leader once the
/// elections settle; during one, no node is leader and the SDK waits.
pub fn metadata_response(
    cluster: &ClusterConfig,
    replica: &ReplicaHandle,
) -> ClusterMetadataResponse {
    let leader = replica.leader();
    ClusterMetadataResponse {
        name: "corelog".into(),
        nodes: cluster
            .nodes
            .iter()
            .map(|n| ClusterNodeResponse {
                name: format!("corelog-{}", n.id),
                ip: n.client.ip().to_string(),
                tcp_port: n.client.port(),
                quic_port: 0,
                http_port: 0,
                websocket_port: 0,
                role: if leader == Some(n.id) {
                    ClusterNodeRole::Leader as u8
                } else {
                    ClusterNodeRole::Follower as u8
                },
                status: ClusterNodeStatus::Healthy as u8,
            })
            .collect(),
    }
}
