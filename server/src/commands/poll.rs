//! POLL_MESSAGES: strategies offset, timestamp, first, last and next; never
//! more than `count` messages; the reply leaves from the mapped segments.

use super::offsets::{consumer_key, resolve};
use super::Outcome;
use crate::context::Context;
use crate::poll_reply::{poll_wire, PollWindow};
use crate::status;
use crate::wire::header::RequestHead;
use corelog::PollFrom;
use iggy_binary_protocol::requests::messages::PollMessagesRequest;
use iggy_common::IggyError;
use std::sync::Arc;

const OFFSET: u8 = 1;
const TIMESTAMP: u8 = 2;
const FIRST: u8 = 3;
const LAST: u8 = 4;
const NEXT: u8 = 5;

/// Bytes the engine is asked for per requested message (at least
/// [`MIN_POLL_BYTES`], at most [`MAX_POLL_BYTES`]); the engine always
/// returns at least one whole batch.
const BYTES_PER_MESSAGE: u64 = 1024;
const MIN_POLL_BYTES: u64 = 64 << 10;
const MAX_POLL_BYTES: u64 = 16 << 20;

/// Serves the poll; with `auto_commit`, stores the last offset sent.
pub(super) async fn poll(
    ctx: &Arc<Context>,
    head: &RequestHead,
    r: PollMessagesRequest,
) -> Result<Outcome, IggyError> {
    let (index, partition) = resolve(ctx, &r.stream_id, &r.topic_id, r.partition_id)?;
    let consumer = consumer_key(&r.consumer);
    let engine_err = |e: corelog::RequestError| status::from_engine(&e);
    let value = r.strategy.value;
    let max_bytes = u64::from(r.count)
        .saturating_mul(BYTES_PER_MESSAGE)
        .clamp(MIN_POLL_BYTES, MAX_POLL_BYTES);
    // The partition's end (for the reply's current_offset) is asked for
    // alongside the poll, except where the poll's start depends on it.
    let stats = ctx.engine.stats(partition);
    let (from, start, stats) = match r.strategy.kind {
        OFFSET => (PollFrom::Offset(value), value, stats),
        TIMESTAMP => (PollFrom::Timestamp(value), 0, stats),
        FIRST => (PollFrom::First, 0, stats),
        LAST => {
            let end = stats.await.map_err(engine_err)?;
            let start = end.next_offset.saturating_sub(u64::from(r.count));
            (PollFrom::Offset(start), start, ctx.engine.stats(partition))
        }
        NEXT => {
            let stored = ctx
                .engine
                .load_offset(partition, consumer)
                .await
                .map_err(engine_err)?;
            let start = stored.map_or(0, |o| o.saturating_add(1));
            (PollFrom::Offset(start), start, stats)
        }
        _ => return Err(IggyError::InvalidCommand),
    };
    let reply = ctx.engine.poll(partition, from, max_bytes);
    let end = stats.await.map_err(engine_err)?;
    let reply = reply.await.map_err(engine_err)?;
    let window = PollWindow {
        start,
        count: r.count,
    };
    // Appends may land between the two answers; never report an end
    // before what the poll returned.
    let current = end.next_offset.max(reply.next_offset()).saturating_sub(1);
    let (wire, summary) = poll_wire(head, reply, window, index, current).map_err(|e| {
        tracing::error!("poll reply: {e}");
        IggyError::CannotReadMessage
    })?;
    if let (true, Some(last)) = (r.auto_commit, summary.last_offset) {
        ctx.store_offset(partition, consumer, last)
            .await
            .map_err(|e| e.status())?;
    }
    Ok(Outcome::Poll(wire))
}
