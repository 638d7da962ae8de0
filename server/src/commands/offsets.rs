//! STORE_CONSUMER_OFFSET, GET_CONSUMER_OFFSET and DELETE_CONSUMER_OFFSET,
//! and the engine's consumer key for an Iggy consumer or group.

use super::authz::Authorized;
use super::groups::{count, group_consumer, no_group};
use super::outcome::Outcome;
use super::session::Session;
use crate::catalog::model::Catalog;
use crate::node::context::Context;
use crate::wire::status;
use crate::wire::status::{from_catalog, identifier};
use iggy_binary_protocol::requests::consumer_offsets::{
    DeleteConsumerOffsetRequest, GetConsumerOffsetRequest, StoreConsumerOffsetRequest,
};
use iggy_binary_protocol::responses::consumer_offsets::get_consumer_offset::ConsumerOffsetResponse;
use iggy_binary_protocol::{WireConsumer, WireIdentifier, KIND_CONSUMER_GROUP};
use iggy_common::IggyError;
use std::sync::Arc;

const NAMED_BIT: u64 = 1 << 63;
/// Named consumers' hashes keep below the group bit (`1 << 62`).
const HASH_MASK: u64 = (1 << 62) - 1;

/// The engine's consumer id for a consumer (not a group): numeric ids are
/// themselves, names hash (XXH3) into the upper half. Groups have their
/// own quarter ([`group_consumer`]).
pub(super) fn consumer_key(id: &WireIdentifier) -> u64 {
    match id {
        WireIdentifier::Numeric(n) => u64::from(*n),
        WireIdentifier::String(s) => {
            NAMED_BIT | (xxhash_rust::xxh3::xxh3_64(s.as_bytes()) & HASH_MASK)
        }
    }
}

/// The Iggy partition index and engine partition a request names
/// (partition 0 when it names none).
pub(super) fn resolve(
    catalog: &Catalog,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
    partition: Option<u32>,
) -> Result<(u32, u64), IggyError> {
    let (_, t) = catalog
        .topic(stream, topic)
        .map_err(|e| from_catalog(e, stream))?;
    let index = partition.unwrap_or(0);
    let engine = t.partitions.get(index as usize).copied().ok_or_else(|| {
        IggyError::PartitionNotFound(index as usize, identifier(topic), identifier(stream))
    })?;
    Ok((index, engine))
}

/// The engine consumer key of a request's consumer, and the engine
/// partition. A group's offset may be changed only by the member owning
/// the partition (`fenced`), which must be named; reading it is open to
/// anyone.
#[allow(clippy::too_many_arguments)]
fn target(
    ctx: &Context,
    catalog: &Catalog,
    session: &Session,
    consumer: &WireConsumer,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
    partition: Option<u32>,
    fenced: bool,
) -> Result<(u32, u64, u64), IggyError> {
    if consumer.kind != KIND_CONSUMER_GROUP {
        let (index, engine) = resolve(catalog, stream, topic, partition)?;
        return Ok((index, engine, consumer_key(&consumer.id)));
    }
    let (s, t) = catalog
        .topic(stream, topic)
        .map_err(|e| from_catalog(e, stream))?;
    let g = t
        .group(&consumer.id)
        .ok_or_else(|| no_group(&consumer.id, topic))?;
    let (index, engine) = resolve(catalog, stream, topic, partition)?;
    if fenced {
        let index = partition.ok_or(IggyError::InvalidIdentifier)?;
        let key = crate::node::membership::GroupKey {
            stream: s.id,
            topic: t.id,
            topic_uid: t.uid,
            group: g.id,
        };
        if !ctx.groups.owns(key, session.connection, count(t), index) {
            return Err(IggyError::ConsumerGroupPartitionNotOwned(
                u32::try_from(session.connection).unwrap_or(u32::MAX),
                index,
            ));
        }
    }
    Ok((index, engine, group_consumer(g.id)))
}

/// Stores the consumer's offset durably. As Iggy's server, an offset past
/// the partition's last message (any offset, when it never held one) is
/// refused with InvalidOffset and nothing is stored.
pub(super) async fn store(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    r: StoreConsumerOffsetRequest,
) -> Result<Outcome, IggyError> {
    let (_, partition, consumer) = target(
        ctx,
        a.catalog(),
        session,
        &r.consumer,
        &r.stream_id,
        &r.topic_id,
        r.partition_id,
        true,
    )?;
    let stats = ctx
        .engine
        .stats(partition)
        .await
        .map_err(|e| status::from_engine(&e))?;
    if r.offset >= stats.next_offset {
        return Err(IggyError::InvalidOffset(r.offset));
    }
    ctx.store_offset(partition, consumer, r.offset)
        .await
        .map_err(|e| e.status())?;
    Ok(Outcome::empty())
}

/// Forgets the consumer's offset durably; an error when it has none.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    r: DeleteConsumerOffsetRequest,
) -> Result<Outcome, IggyError> {
    let (index, partition, consumer) = target(
        ctx,
        a.catalog(),
        session,
        &r.consumer,
        &r.stream_id,
        &r.topic_id,
        r.partition_id,
        true,
    )?;
    let existed = ctx
        .delete_offset(partition, consumer)
        .await
        .map_err(|e| e.status())?;
    if !existed {
        return Err(IggyError::ConsumerOffsetNotFound(index as usize));
    }
    Ok(Outcome::empty())
}

/// The consumer's stored offset; an empty body when it has none.
pub(super) async fn get(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    r: GetConsumerOffsetRequest,
) -> Result<Outcome, IggyError> {
    let found = target(
        ctx,
        a.catalog(),
        session,
        &r.consumer,
        &r.stream_id,
        &r.topic_id,
        r.partition_id,
        false,
    );
    let (index, partition, consumer) = match found {
        Ok(t) => t,
        // A group that is not there has no offset.
        Err(IggyError::ConsumerGroupIdNotFound(..) | IggyError::ConsumerGroupNameNotFound(..)) => {
            return Ok(Outcome::empty())
        }
        Err(e) => return Err(e),
    };
    let stats = ctx.engine.stats(partition);
    let stored = ctx
        .engine
        .load_offset(partition, consumer)
        .await
        .map_err(|e| status::from_engine(&e))?;
    let current = stats.await.map_err(|e| status::from_engine(&e))?;
    let Some(stored_offset) = stored else {
        return Ok(Outcome::empty());
    };
    Ok(Outcome::encoded(&ConsumerOffsetResponse {
        partition_id: index,
        current_offset: current.next_offset.saturating_sub(1),
        stored_offset,
    }))
}
