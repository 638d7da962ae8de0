//! corelog-server in a cluster (`--node ID --cluster FILE`): the catalog as
//! the metadata group's state machine, and what clients are told about the
//! nodes.
//!
//! A catalog change is made on the leader from its catalog (the closure of
//! `Context::update_catalog`), then replicated whole: every node applies
//! the new catalog in log order, persists it (with the entry's index, so a
//! restart does not apply it again), and creates or deletes the engine
//! partitions the change added or removed. Partition ids are never reused,
//! so a late entry for a deleted partition is recognised and dropped.

use crate::catalog::Catalog;
use crate::metadata::{decode_body, encode_body, MetadataStore};
use bytes::Bytes;
use corelog_replica::{ClusterConfig, MetaMachine, ReplicaHandle};
use iggy_binary_protocol::responses::system::get_cluster_metadata::{
    ClusterMetadataResponse, ClusterNodeResponse,
};
use iggy_common::{ClusterNodeRole, ClusterNodeStatus};
use std::collections::HashSet;
use std::sync::Arc;

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
    /// deletes those the catalog dropped.
    fn reconcile(&self, next: &Catalog) -> Result<(), String> {
        let held: HashSet<u64> = next.all_partitions().collect();
        let present: HashSet<u64> = self
            .engine
            .partitions()
            .wait()
            .map_err(|e| e.to_string())?
            .into_iter()
            .collect();
        for p in held.difference(&present) {
            self.engine
                .create_partition(*p)
                .wait()
                .map_err(|e| format!("create partition {p}: {e}"))?;
        }
        for p in present.difference(&held) {
            if *p < next.next_partition {
                tracing::info!("deleting partition {p}: the catalog dropped it");
                self.engine
                    .delete_partition(*p)
                    .wait()
                    .map_err(|e| format!("delete partition {p}: {e}"))?;
            }
        }
        Ok(())
    }
}

impl MetaMachine for CatalogMachine {
    fn applied_index(&self) -> u64 {
        self.metadata.snapshot().replica_applied
    }

    fn version(&self) -> u64 {
        self.metadata.snapshot().replica_version
    }

    fn apply(&self, index: u64, base: u64, data: &[u8]) -> Result<bool, String> {
        let current = self.metadata.snapshot();
        if index <= current.replica_applied {
            return Ok(true);
        }
        if current.replica_version != base {
            return Ok(false);
        }
        let mut next = decode_body(data)?;
        next.replica_applied = index;
        next.replica_version = index;
        self.metadata
            .replace(next.clone())
            .map_err(|e| e.to_string())?;
        self.reconcile(&next)?;
        Ok(true)
    }

    fn snapshot(&self) -> Bytes {
        Bytes::from(encode_body(&self.metadata.snapshot()))
    }

    fn restore(&self, index: u64, data: &[u8]) -> Result<(), String> {
        let mut next = decode_body(data)?;
        next.replica_applied = next.replica_applied.max(index);
        self.metadata
            .replace(next.clone())
            .map_err(|e| e.to_string())?;
        tracing::info!("catalog restored from a snapshot at entry {index}");
        self.reconcile(&next)
    }

    fn keeps(&self, partition: u64) -> bool {
        let c = self.metadata.snapshot();
        partition >= c.next_partition || c.all_partitions().any(|p| p == partition)
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
