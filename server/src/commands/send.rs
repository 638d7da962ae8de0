//! SEND_MESSAGES: the batch inside the request is admitted (every checksum
//! verified) and stored verbatim; the reply follows the engine's ack, which
//! comes at the fsync policy's durable point.
//!
//! In a cluster a send carries its origin (client, session, request number
//! from the header): a repeat of a send whose outcome the client did not
//! learn ("not committed") is answered from the first, never stored twice,
//! and goes to the partition the first went to. A node that does not lead
//! answers only such repeats (of sends it took while it led); anything else
//! there is "not accepted", nothing done.

use super::authz::Authorized;
use super::outcome::Outcome;
use super::session::Session;
use crate::node::context::Context;
use crate::wire::header::RequestHead;
use crate::wire::request::SendMessages;
use crate::wire::status;
use crate::wire::status::{from_catalog, identifier};
use bytes::Bytes;
use iggy_binary_protocol::batch::{BATCH_HEADER_SIZE, BATCH_MESSAGE_COUNT_OFFSET};
use iggy_binary_protocol::requests::messages::FlushUnsavedBufferRequest;
use iggy_binary_protocol::responses::messages::send_messages::{
    SendMessagesConfirmationResponse, SendMessagesResponse,
};
use iggy_binary_protocol::WirePartitioning;
use iggy_common::IggyError;
use std::sync::Arc;

/// Stores the request's batch in the partition its partitioning picks.
pub(super) async fn send(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &mut Session,
    head: &RequestHead,
    r: SendMessages,
    payload: Bytes,
) -> Result<Outcome, IggyError> {
    let follower = ctx.replica().is_some_and(|r| !r.leads_all());
    let result = send_as(ctx, a, session, head, r, payload).await;
    match result {
        // Whatever a node that does not lead finds wrong, the leader decides.
        Err(e) if follower && e != IggyError::TransientNotCommitted => {
            tracing::debug!("send on a node that does not lead: {e}");
            Err(IggyError::TransientNotAccepted)
        }
        other => other,
    }
}

async fn send_as(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &mut Session,
    head: &RequestHead,
    r: SendMessages,
    payload: Bytes,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (s, t) = catalog
        .topic(&r.stream_id, &r.topic_id)
        .map_err(|e| from_catalog(e, &r.stream_id))?;
    let count = u32::try_from(t.partitions.len()).unwrap_or(u32::MAX);
    if count == 0 {
        return Err(IggyError::NoPartitions(
            identifier(&r.topic_id),
            identifier(&r.stream_id),
        ));
    }
    let index = match &r.partitioning {
        WirePartitioning::PartitionId(p) => *p,
        WirePartitioning::Balanced => match session.balanced {
            Some((request, index)) if request == head.request && index < count => index,
            _ => {
                let index = ctx.next_balanced(count);
                session.balanced = Some((head.request, index));
                index
            }
        },
        WirePartitioning::MessagesKey(key) => iggy_common::calculate_32(key) % count,
    };
    let Some(&partition) = t.partitions.get(index as usize) else {
        return Err(IggyError::PartitionNotFound(
            index as usize,
            identifier(&r.topic_id),
            identifier(&r.stream_id),
        ));
    };
    let batch = payload.slice(r.batch_at.min(payload.len())..);
    // The batch alone holds the request's bytes, so that a leader can stamp
    // it where it lies (`Batch::stamp`; a pooled buffer is copied once).
    drop(payload);
    if let Some(declared) = declared_count(&batch) {
        if declared != r.messages_count {
            crate::wire::status::refused(&format_args!(
                "send_messages: messages_count {} but the batch header says {declared}",
                r.messages_count
            ));
            return Err(IggyError::InvalidMessagesCount);
        }
    }
    let origin = origin(a.user(), session, head);
    let ack = ctx
        .append(partition, batch, origin)
        .await
        .map_err(|e| e.status())?;
    Ok(Outcome::encoded(&SendMessagesResponse {
        confirmations: vec![SendMessagesConfirmationResponse {
            stream_id: s.id,
            topic_id: t.id,
            partition_id: index,
            base_offset: ack.base_offset,
        }],
    }))
}

/// Who a send comes from, for the replicas' repeat table: the header's
/// client id bound to the signed-in user, and the session this node gave
/// the connection (not the header's session field). Both header fields are
/// the client's to choose; keyed by them alone, another user copying a
/// client's id, session and request number would be answered from its
/// send (its own batch dropped) or overwrite its entry. The SDK echoes the
/// session it was given, so its repeats still match.
fn origin(user: u32, session: &Session, head: &RequestHead) -> corelog_replica::Origin {
    let client = if head.client == 0 {
        0 // unknown: never a repeat
    } else {
        let mut key = [0u8; 20];
        key[..4].copy_from_slice(&user.to_le_bytes());
        key[4..].copy_from_slice(&head.client.to_le_bytes());
        xxhash_rust::xxh3::xxh3_128(&key).max(1)
    };
    corelog_replica::Origin {
        client,
        session: session.id.unwrap_or(0),
        request: head.request,
    }
}

/// Makes everything stored in the partition durable (with or without
/// `fsync` asked: corelog has no unsaved buffer, only unsynced pages).
pub(super) async fn flush(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: FlushUnsavedBufferRequest,
) -> Result<Outcome, IggyError> {
    let (_, partition) =
        super::offsets::resolve(a.catalog(), &r.stream_id, &r.topic_id, Some(r.partition_id))?;
    ctx.engine
        .flush(partition)
        .await
        .map_err(|e| status::from_engine(&e))?;
    Ok(Outcome::empty())
}

/// `message_count` of a batch header, if the bytes hold one.
fn declared_count(batch: &[u8]) -> Option<u32> {
    if batch.len() < BATCH_HEADER_SIZE {
        return None;
    }
    let b = batch.get(BATCH_MESSAGE_COUNT_OFFSET..BATCH_MESSAGE_COUNT_OFFSET + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
