//! What topic creation, deletion and a topic's later changes share: the
//! engine partitions' retention and their deletion.

use crate::node::context::Context;
use crate::wire::status;
use iggy_binary_protocol::WireIdentifier;
use iggy_common::IggyError;

/// Gives the engine partitions of the topic the retention its settings
/// ask for (`TopicMeta::retention`).
pub(super) async fn apply_retention(
    ctx: &Context,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
) -> Result<(), IggyError> {
    let catalog = ctx.metadata.snapshot();
    let Ok((_, t)) = catalog.topic(stream, topic) else {
        return Ok(());
    };
    ctx.set_retention(&t.partitions, t.retention())
        .await
        .map_err(|e| status::from_engine(&e))
}

/// Deletes the engine partitions' data.
pub(super) async fn delete_partitions(ctx: &Context, partitions: &[u64]) -> Result<(), IggyError> {
    ctx.delete_partitions(partitions)
        .await
        .map_err(|e| e.status())
}
