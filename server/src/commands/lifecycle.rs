//! A topic's life after its creation: UPDATE_STREAM, UPDATE_TOPIC,
//! PURGE_STREAM, PURGE_TOPIC, CREATE_PARTITIONS, DELETE_PARTITIONS,
//! DELETE_SEGMENTS, and the retention a topic's settings ask for.
//!
//! New partitions (created or given by a purge) follow the topic
//! creation's order: their ids are reserved durably, the engine creates
//! them, then the catalog records them; a crash in between leaves
//! partitions no topic holds, which the next start deletes. Partitions a
//! topic gives up are forgotten durably first, then deleted.

use super::authz::Authorized;
use super::change_error::UpdateError;
use super::groups::count;
use super::outcome::Outcome;
use super::partitions::{apply_retention, delete_partitions};
use crate::node::context::Context;
use crate::wire::status;
use crate::wire::status::{from_catalog, identifier};
use iggy_binary_protocol::requests::partitions::{
    CreatePartitionsRequest, DeletePartitionsRequest,
};
use iggy_binary_protocol::requests::segments::DeleteSegmentsRequest;
use iggy_binary_protocol::requests::streams::UpdateStreamRequest;
use iggy_binary_protocol::requests::topics::UpdateTopicRequest;
use iggy_binary_protocol::{WireIdentifier, MAX_PARTITIONS_PER_REQUEST};
use iggy_common::IggyError;
use std::sync::Arc;

/// Renames the stream and replaces its options.
pub(super) async fn update_stream(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: UpdateStreamRequest,
) -> Result<Outcome, IggyError> {
    crate::catalog::options::refuse_keys(&r.options)?;
    let options = r.options.as_bytes().to_vec();
    ctx.update_catalog(a, |c| -> Result<_, UpdateError> {
        Ok(c.update_stream(&r.stream_id, r.name.as_str(), options)?)
    })
    .await
    .map_err(|e| e.status(&r.stream_id))?;
    Ok(Outcome::empty())
}

/// Renames the topic and sets the options sent over its own; its
/// partitions take the retention the new settings ask for.
pub(super) async fn update_topic(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: UpdateTopicRequest,
) -> Result<Outcome, IggyError> {
    let stored = {
        let catalog = a.catalog();
        let (_, t) = catalog
            .topic(&r.stream_id, &r.topic_id)
            .map_err(|e| from_catalog(e, &r.stream_id))?;
        t.options.clone()
    };
    let options = crate::catalog::options::for_update(&r.options, &stored, ctx.topic_defaults())?;
    let id = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            Ok(
                c.update_topic(&r.stream_id, &r.topic_id, r.name.as_str(), &options)?
                    .id,
            )
        })
        .await
        .map_err(|e| e.status(&r.stream_id))?;
    apply_retention(ctx, &r.stream_id, &WireIdentifier::Numeric(id)).await?;
    Ok(Outcome::empty())
}

/// Empties the topics of `stream` (or only `topic`): each gets fresh,
/// empty partitions, and the old ones are deleted with their messages and
/// consumer offsets.
pub(super) async fn purge(
    ctx: &Arc<Context>,
    a: &Authorized,
    stream: &WireIdentifier,
    topic: Option<&WireIdentifier>,
) -> Result<Outcome, IggyError> {
    let fresh = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            let targets = c.purge_targets(stream, topic)?;
            let mut fresh = Vec::with_capacity(targets.len());
            for (tid, n) in targets {
                let n = u32::try_from(n).unwrap_or(u32::MAX);
                fresh.push((tid, c.reserve_partitions(n)?));
            }
            Ok(fresh)
        })
        .await
        .map_err(|e| status::from_purge(e, stream, topic))?;
    let ids: Vec<u64> = fresh.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    ctx.create_partitions(&ids).await.map_err(|e| e.status())?;
    let topics: Vec<u32> = fresh.iter().map(|(t, _)| *t).collect();
    let old = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            Ok(c.renew_partitions(stream, fresh.clone())?)
        })
        .await
        .map_err(|e| status::from_purge(e, stream, topic))?;
    for t in topics {
        apply_retention(ctx, stream, &WireIdentifier::Numeric(t)).await?;
    }
    delete_partitions(ctx, &old).await?;
    Ok(Outcome::empty())
}

/// Adds `partitions_count` empty partitions to the topic.
pub(super) async fn create_partitions(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: CreatePartitionsRequest,
) -> Result<Outcome, IggyError> {
    // As Iggy: adding none or more than a request may is TooManyPartitions.
    if r.partitions_count == 0 || r.partitions_count > MAX_PARTITIONS_PER_REQUEST {
        return Err(IggyError::TooManyPartitions);
    }
    let (stream, topic) = (&r.stream_id, &r.topic_id);
    let reserved = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            let (_, t) = c.topic(stream, topic)?;
            if t.partitions.len() as u64 + u64::from(r.partitions_count)
                > u64::from(MAX_PARTITIONS_PER_REQUEST)
            {
                return Ok(None);
            }
            Ok(Some(c.reserve_partitions(r.partitions_count)?))
        })
        .await
        .map_err(|e| e.status(stream))?
        .ok_or(IggyError::TooManyPartitions)?;
    ctx.create_partitions(&reserved)
        .await
        .map_err(|e| e.status())?;
    ctx.update_catalog(a, |c| -> Result<_, UpdateError> {
        Ok(c.add_partitions(stream, topic, reserved.clone())?)
    })
    .await
    .map_err(|e| e.status(stream))?;
    apply_retention(ctx, stream, topic).await?;
    Ok(Outcome::empty())
}

/// Removes the topic's last `partitions_count` partitions and their data.
pub(super) async fn delete_partitions_of(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: DeletePartitionsRequest,
) -> Result<Outcome, IggyError> {
    // As Iggy: removing none or more than a request may add is
    // TooManyPartitions; more than the topic has, InvalidPartitionsCount.
    if r.partitions_count == 0 || r.partitions_count > MAX_PARTITIONS_PER_REQUEST {
        return Err(IggyError::TooManyPartitions);
    }
    let (stream, topic) = (&r.stream_id, &r.topic_id);
    let removed = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            let (_, t) = c.topic(stream, topic)?;
            if r.partitions_count == 0 || r.partitions_count > count(t) {
                return Ok(None);
            }
            Ok(Some(c.remove_partitions(
                stream,
                topic,
                r.partitions_count,
            )?))
        })
        .await
        .map_err(|e| e.status(stream))?
        .ok_or(IggyError::InvalidPartitionsCount)?;
    delete_partitions(ctx, &removed).await?;
    apply_retention(ctx, stream, topic).await?;
    Ok(Outcome::empty())
}

/// Deletes the partition's oldest `segments_count` sealed segments (the
/// active segment is never deleted).
pub(super) async fn delete_segments(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: DeleteSegmentsRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (_, t) = catalog
        .topic(&r.stream_id, &r.topic_id)
        .map_err(|e| from_catalog(e, &r.stream_id))?;
    let partition = t
        .partitions
        .get(r.partition_id as usize)
        .copied()
        .ok_or_else(|| {
            IggyError::PartitionNotFound(
                r.partition_id as usize,
                identifier(&r.topic_id),
                identifier(&r.stream_id),
            )
        })?;
    let deleted = ctx
        .delete_segments(partition, r.segments_count as usize)
        .await
        .map_err(|e| e.status())?;
    tracing::info!(
        "deleted {deleted} of the {} segments asked for in partition {partition}",
        r.segments_count
    );
    Ok(Outcome::empty())
}
