//! GET_TOPIC, GET_TOPICS, CREATE_TOPIC, DELETE_TOPIC.

use super::authz::Authorized;
use super::change_error::UpdateError;
use super::outcome::Outcome;
use super::partitions::{apply_retention, delete_partitions};
use crate::catalog::model::TopicMeta;
use crate::node::context::{now_micros, Context};
use crate::wire::status::{from_catalog, identifier};
use corelog::LogStats;
use iggy_binary_protocol::requests::topics::CreateTopicRequest;
use iggy_binary_protocol::responses::streams::get_stream::TopicHeader;
use iggy_binary_protocol::responses::topics::get_topic::{GetTopicResponse, PartitionResponse};
use iggy_binary_protocol::responses::topics::get_topics::GetTopicsResponse;
use iggy_binary_protocol::{WireIdentifier, WireName, MAX_PARTITIONS_PER_REQUEST};
use iggy_common::IggyError;
use std::sync::Arc;

/// The engine's stats of each partition (`None` where it has none).
pub(super) async fn partition_stats(ctx: &Context, partitions: &[u64]) -> Vec<Option<LogStats>> {
    let replies: Vec<_> = partitions.iter().map(|p| ctx.engine.stats(*p)).collect();
    let mut out = Vec::with_capacity(replies.len());
    for r in replies {
        out.push(r.await.ok());
    }
    out
}

/// Bytes and messages over `stats`.
pub(super) fn totals(stats: &[Option<LogStats>]) -> (u64, u64) {
    stats.iter().flatten().fold((0, 0), |(b, m), s| {
        (
            b + s.bytes,
            m + s.next_offset.saturating_sub(s.first_offset),
        )
    })
}

/// The wire header of `topic`, with its totals.
pub(super) fn header(
    ctx: &Context,
    topic: &TopicMeta,
    stats: &[Option<LogStats>],
) -> Result<TopicHeader, IggyError> {
    let (size_bytes, messages_count) = totals(stats);
    let (options, derived_options) =
        crate::catalog::options::answer(&topic.options, ctx.topic_defaults())?;
    Ok(TopicHeader {
        id: topic.id,
        created_at: topic.created_at,
        partitions_count: u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX),
        message_expiry: topic.limits().message_expiry,
        compression_algorithm: crate::catalog::options::compression(&topic.options),
        max_topic_size: topic.limits().max_topic_size,
        size_bytes,
        messages_count,
        name: WireName::new(topic.name.as_str()).map_err(|_| IggyError::InvalidTopicName)?,
        options,
        derived_options,
    })
}

async fn details(ctx: &Context, topic: &TopicMeta) -> Result<GetTopicResponse, IggyError> {
    let stats = partition_stats(ctx, &topic.partitions).await;
    let partitions = stats
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s.unwrap_or_default();
            PartitionResponse {
                id: i as u32,
                created_at: topic.created_at,
                segments_count: u32::try_from(s.segments).unwrap_or(u32::MAX),
                current_offset: s.next_offset.saturating_sub(1),
                size_bytes: s.bytes,
                messages_count: s.next_offset.saturating_sub(s.first_offset),
            }
        })
        .collect();
    Ok(GetTopicResponse {
        topic: header(ctx, topic, &stats)?,
        partitions,
    })
}

/// The topic with its partitions; an empty body when there is none.
pub(super) async fn get(
    ctx: &Arc<Context>,
    a: &Authorized,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let Ok((_, t)) = catalog.topic(stream, topic) else {
        return Ok(Outcome::empty());
    };
    Ok(Outcome::encoded(&details(ctx, t).await?))
}

/// Every topic of the stream.
pub(super) async fn get_all(
    ctx: &Arc<Context>,
    a: &Authorized,
    stream: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    // As Iggy: a stream that is not there lists no topics.
    let Ok(s) = catalog.stream(stream) else {
        return Ok(Outcome::encoded(&GetTopicsResponse { topics: Vec::new() }));
    };
    let mut topics = Vec::with_capacity(s.topics.len());
    for t in &s.topics {
        let stats = partition_stats(ctx, &t.partitions).await;
        topics.push(header(ctx, t, &stats)?);
    }
    Ok(Outcome::encoded(&GetTopicsResponse { topics }))
}

/// Reserves engine partition ids (durably), creates the partitions, then
/// records the topic. A crash in between leaves unreferenced partitions,
/// which the next start deletes.
pub(super) async fn create(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: CreateTopicRequest,
) -> Result<Outcome, IggyError> {
    let stream = &r.stream_id;
    if r.partitions_count > MAX_PARTITIONS_PER_REQUEST {
        return Err(IggyError::TooManyPartitions);
    }
    if asks_for_fsync(&r.options) && !ctx.durable_acks {
        // Durability is the server's (`--fsync`), for every topic: a topic
        // that asks for an fsync per write on a server that acknowledges
        // before syncing is refused, never silently given less.
        return Err(IggyError::InvalidOptionValue(
            "enforce_fsync: this server acknowledges sends before syncing (--fsync never or interval); run it with --fsync batch".into(),
        ));
    }
    let options = crate::catalog::options::for_create(&r.options, ctx.topic_defaults())?;
    let name = r.name.as_str();
    let reserved = ctx
        .update_catalog(a, |c| -> Result<Vec<u64>, UpdateError> {
            let s = c.stream(stream)?;
            if s.topics.iter().any(|t| t.name == name) {
                return Err(crate::catalog::model::CatalogError::TopicExists {
                    stream: s.name.clone(),
                    topic: name.to_owned(),
                }
                .into());
            }
            Ok(c.reserve_partitions(r.partitions_count)?)
        })
        .await
        .map_err(|e| e.status(stream))?;
    ctx.create_partitions(&reserved)
        .await
        .map_err(|e| e.status())?;
    ctx.update_catalog(a, |c| -> Result<_, UpdateError> {
        Ok(c.add_topic(stream, name, reserved.clone(), options, now_micros())?)
    })
    .await
    .map_err(|e| e.status(stream))?;
    let topic = WireIdentifier::String(r.name.clone());
    apply_retention(ctx, stream, &topic).await?;
    let catalog = ctx.metadata.snapshot();
    let (_, t) = catalog
        .topic(stream, &topic)
        .map_err(|e| from_catalog(e, stream))?;
    Ok(Outcome::encoded(&details(ctx, t).await?))
}

/// Forgets the topic (durably), then deletes its partitions' data.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let partitions = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            Ok(c.remove_topic(stream, topic)?)
        })
        .await
        .map_err(|e| match e {
            UpdateError::Catalog(crate::catalog::model::CatalogError::NoTopic { .. }) => {
                IggyError::TopicIdNotFound(identifier(topic), identifier(stream))
            }
            e => e.status(stream),
        })?;
    delete_partitions(ctx, &partitions).await?;
    Ok(Outcome::empty())
}

/// Whether topic options ask for an fsync per write (`enforce_fsync` true,
/// as a bool or the string "true").
fn asks_for_fsync(options: &iggy_binary_protocol::WireOptions) -> bool {
    options.iter().any(|e| {
        e.key == b"enforce_fsync" && (e.value == [1] || e.value.eq_ignore_ascii_case(b"true"))
    })
}
