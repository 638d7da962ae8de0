//! GET_STREAMS, GET_STREAM, CREATE_STREAM, DELETE_STREAM.

use super::authz::Authorized;
use super::change_error::UpdateError;
use super::outcome::Outcome;
use super::partitions::delete_partitions;
use super::topics::{header, partition_stats, totals};
use crate::catalog::model::StreamMeta;
use crate::node::context::{now_micros, Context};
use crate::wire::status::from_catalog;
use iggy_binary_protocol::requests::streams::CreateStreamRequest;
use iggy_binary_protocol::responses::streams::get_stream::GetStreamResponse;
use iggy_binary_protocol::responses::streams::get_streams::GetStreamsResponse;
use iggy_binary_protocol::responses::streams::StreamResponse;
use iggy_binary_protocol::{WireIdentifier, WireName, WireOptions};
use iggy_common::IggyError;
use std::sync::Arc;

async fn details(ctx: &Context, s: &StreamMeta) -> Result<GetStreamResponse, IggyError> {
    let mut topics = Vec::with_capacity(s.topics.len());
    let (mut size_bytes, mut messages_count) = (0, 0);
    for t in &s.topics {
        let stats = partition_stats(ctx, &t.partitions).await;
        let (b, m) = totals(&stats);
        size_bytes += b;
        messages_count += m;
        topics.push(header(ctx, t, &stats)?);
    }
    Ok(GetStreamResponse {
        stream: StreamResponse {
            id: s.id,
            created_at: s.created_at,
            topics_count: u32::try_from(s.topics.len()).unwrap_or(u32::MAX),
            size_bytes,
            messages_count,
            name: WireName::new(s.name.as_str()).map_err(|_| IggyError::InvalidStreamName)?,
            options: WireOptions::from_validated(s.options.clone().into()),
        },
        topics,
    })
}

/// Every stream, without its topics.
pub(super) async fn get_all(ctx: &Arc<Context>, a: &Authorized) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let mut streams = Vec::with_capacity(catalog.streams.len());
    for s in &catalog.streams {
        streams.push(details(ctx, s).await?.stream);
    }
    Ok(Outcome::encoded(&GetStreamsResponse { streams }))
}

/// The stream with its topics; an empty body when there is none.
pub(super) async fn get(
    ctx: &Arc<Context>,
    a: &Authorized,
    id: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let Ok(s) = catalog.stream(id) else {
        return Ok(Outcome::empty());
    };
    Ok(Outcome::encoded(&details(ctx, s).await?))
}

/// Records a new stream durably.
pub(super) async fn create(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: CreateStreamRequest,
) -> Result<Outcome, IggyError> {
    let name = WireIdentifier::String(r.name.clone());
    crate::catalog::options::refuse_keys(&r.options)?;
    let options = r.options.as_bytes().to_vec();
    let id = ctx
        .update_catalog(a, |c| -> Result<u32, UpdateError> {
            Ok(c.add_stream(r.name.as_str(), options, now_micros())?)
        })
        .await
        .map_err(|e| e.status(&name))?;
    let catalog = ctx.metadata.snapshot();
    let s = catalog
        .stream(&WireIdentifier::Numeric(id))
        .map_err(|e| from_catalog(e, &name))?;
    Ok(Outcome::encoded(&details(ctx, s).await?))
}

/// Forgets the stream (durably), then deletes its partitions' data.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    id: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let partitions = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            Ok(c.remove_stream(id)?)
        })
        .await
        .map_err(|e| e.status(id))?;
    delete_partitions(ctx, &partitions).await?;
    Ok(Outcome::empty())
}
