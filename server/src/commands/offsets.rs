//! STORE_CONSUMER_OFFSET and GET_CONSUMER_OFFSET, and the engine's consumer
//! key for an Iggy consumer.

use super::{from_catalog, identifier, Outcome};
use crate::context::Context;
use crate::status;
use iggy_binary_protocol::requests::consumer_offsets::{
    GetConsumerOffsetRequest, StoreConsumerOffsetRequest,
};
use iggy_binary_protocol::responses::consumer_offsets::get_consumer_offset::ConsumerOffsetResponse;
use iggy_binary_protocol::{WireConsumer, WireIdentifier, KIND_CONSUMER_GROUP};
use iggy_common::IggyError;
use std::sync::Arc;

const GROUP_BIT: u64 = 1 << 62;
const NAMED_BIT: u64 = 1 << 63;

/// The engine's consumer id for `c`: numeric ids are themselves, names
/// hash (XXH3) into the upper half; groups have their own quarter.
pub(super) fn consumer_key(c: &WireConsumer) -> u64 {
    let id = match &c.id {
        WireIdentifier::Numeric(n) => u64::from(*n),
        WireIdentifier::String(s) => {
            NAMED_BIT | (xxhash_rust::xxh3::xxh3_64(s.as_bytes()) & (GROUP_BIT - 1))
        }
    };
    if c.kind == KIND_CONSUMER_GROUP {
        id | GROUP_BIT
    } else {
        id
    }
}

/// The Iggy partition index and engine partition a request names
/// (partition 0 when it names none).
pub(super) fn resolve(
    ctx: &Context,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
    partition: Option<u32>,
) -> Result<(u32, u64), IggyError> {
    let catalog = ctx.metadata.snapshot();
    let (_, t) = catalog
        .topic(stream, topic)
        .map_err(|e| from_catalog(e, stream))?;
    let index = partition.unwrap_or(0);
    let engine = t.partitions.get(index as usize).copied().ok_or_else(|| {
        IggyError::PartitionNotFound(index as usize, identifier(topic), identifier(stream))
    })?;
    Ok((index, engine))
}

/// Stores the consumer's offset durably.
pub(super) async fn store(
    ctx: &Arc<Context>,
    r: StoreConsumerOffsetRequest,
) -> Result<Outcome, IggyError> {
    let (_, partition) = resolve(ctx, &r.stream_id, &r.topic_id, r.partition_id)?;
    ctx.store_offset(partition, consumer_key(&r.consumer), r.offset)
        .await
        .map_err(|e| e.status())?;
    Ok(Outcome::empty())
}

/// The consumer's stored offset; an empty body when it has none.
pub(super) async fn get(
    ctx: &Arc<Context>,
    r: GetConsumerOffsetRequest,
) -> Result<Outcome, IggyError> {
    let (index, partition) = resolve(ctx, &r.stream_id, &r.topic_id, r.partition_id)?;
    let stats = ctx.engine.stats(partition);
    let stored = ctx
        .engine
        .load_offset(partition, consumer_key(&r.consumer))
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
