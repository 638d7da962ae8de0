//! Every change of state a command makes, and why one was not made. On one
//! node they go straight to the engine and the catalog file; in a cluster
//! they are replicated first.

use crate::commands::authz::{Authorized, Denied};
use crate::node::context::Context;

/// Why a change of state was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] corelog::RequestError),
    /// The replication refused or failed.
    #[error(transparent)]
    Replica(#[from] corelog_replica::ReplicaError),
}

/// Every change of state goes through these: a send, a stored offset, a
/// catalog change and the partitions it creates or deletes. On one node
/// they go straight to the engine and the catalog file; in a cluster they
/// are replicated first (the `corelog-replica` crate), and every node
/// applies them. Reads use `engine` and `metadata.snapshot()` directly.
impl Context {
    /// The replica, in a cluster.
    pub fn replica(&self) -> Option<&corelog_replica::ReplicaHandle> {
        self.cluster.as_ref().map(|c| &c.replica)
    }

    /// Stores a producer's batch in `partition`; resolves at the fsync
    /// policy's durable point (in a cluster: on a majority's, and a repeat
    /// of a send from the same `origin` is answered from the first; a node
    /// that does not lead answers such repeats and forwards other sends to
    /// the leader, answering with its answer).
    pub async fn append(
        &self,
        partition: u64,
        batch: bytes::Bytes,
        origin: corelog_replica::Origin,
    ) -> Result<corelog::AppendAck, StoreError> {
        match self.replica() {
            Some(r) if r.leads_all() => Ok(r.append(partition, batch, origin).await?),
            Some(r) => Ok(r.append_or_forward(partition, batch, origin).await?),
            None => Ok(self.engine.append(partition, batch).await?),
        }
    }

    /// Durably stores `consumer`'s offset in `partition`.
    pub async fn store_offset(
        &self,
        partition: u64,
        consumer: u64,
        offset: u64,
    ) -> Result<(), StoreError> {
        match self.replica() {
            Some(r) => Ok(r.store_offset(partition, consumer, offset).await?),
            None => Ok(self
                .engine
                .store_offset(partition, consumer, offset)
                .await?),
        }
    }

    /// Durably forgets `consumer`'s offset in `partition`; resolves to
    /// whether there was one.
    pub async fn delete_offset(&self, partition: u64, consumer: u64) -> Result<bool, StoreError> {
        match self.replica() {
            Some(r) => Ok(r.delete_offset(partition, consumer).await?),
            None => Ok(self.engine.delete_offset(partition, consumer).await?),
        }
    }

    /// Deletes the oldest `count` sealed segments of `partition` (never
    /// its active one); resolves to how many were deleted.
    pub async fn delete_segments(&self, partition: u64, count: usize) -> Result<usize, StoreError> {
        match self.replica() {
            Some(r) => Ok(r.delete_segments(partition, count).await?),
            None => Ok(self.engine.delete_segments(partition, count).await?.len()),
        }
    }

    /// Sets the retention of engine partitions (derived from their topic's
    /// settings in the catalog: every node applies it from its own copy,
    /// at start and after each topic change).
    pub async fn set_retention(
        &self,
        partitions: &[u64],
        retention: corelog::Retention,
    ) -> Result<(), corelog::RequestError> {
        let sets: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.set_retention(*p, retention))
            .collect();
        for s in sets {
            s.await?;
        }
        Ok(())
    }

    /// Applies `change` to the catalog and persists it (see
    /// [`crate::catalog::store::MetadataStore::update_async`]: the file I/O off the shard). In a
    /// cluster the changed catalog is replicated, and every node applies it
    /// (creating and deleting the engine partitions it added or dropped)
    /// before this returns.
    ///
    /// `request`'s permission check runs first, under the writer lock,
    /// against the catalog `change` is given: what `change` resolves is
    /// what was checked (`commands/authz.rs`).
    pub async fn update_catalog<T, E>(
        &self,
        request: &Authorized,
        change: impl FnOnce(&mut crate::catalog::model::Catalog) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<crate::catalog::store::MetadataError> + From<Denied>,
    {
        let change = |c: &mut crate::catalog::model::Catalog| {
            request.check(c)?;
            change(c)
        };
        let Some(cluster) = &self.cluster else {
            return self.metadata.update_async(change).await;
        };
        let _writer = cluster.catalog_writer.lock().await;
        let base = self.metadata.snapshot();
        let mut next = (*base).clone();
        let out = change(&mut next)?;
        if next == *base {
            return Ok(out);
        }
        let body = bytes::Bytes::from(crate::catalog::store::encode_body(&next));
        cluster
            .replica
            .propose_meta(base.replica_version, body)
            .await
            .map_err(crate::catalog::store::MetadataError::from)?;
        Ok(out)
    }

    /// Creates engine partitions (those that exist stay as they are). In a
    /// cluster, the catalog change that holds them creates them on every
    /// node.
    pub async fn create_partitions(&self, partitions: &[u64]) -> Result<(), StoreError> {
        if self.cluster.is_some() {
            return Ok(());
        }
        let creates: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.create_partition(*p))
            .collect();
        for c in creates {
            c.await?;
        }
        Ok(())
    }

    /// Deletes engine partitions and their data. In a cluster, the catalog
    /// change that dropped them deletes them on every node.
    pub async fn delete_partitions(&self, partitions: &[u64]) -> Result<(), StoreError> {
        if self.cluster.is_some() {
            return Ok(());
        }
        let deletes: Vec<_> = partitions
            .iter()
            .map(|p| self.engine.delete_partition(*p))
            .collect();
        for d in deletes {
            d.await?;
        }
        Ok(())
    }
}
