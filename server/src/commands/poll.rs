//! POLL_MESSAGES: strategies offset, timestamp, first, last and next;
//! `count` messages (fewer only when the partition holds fewer from the
//! start); the reply leaves from the mapped segments. A consumer group's
//! poll reads a partition the member owns, under a lease, and its `next`
//! and auto commit use the group's offset.

use super::authz::Authorized;
use super::groups::{count as partitions_of, group_consumer, no_group};
use super::offsets::consumer_key;
use super::outcome::Outcome;
use super::session::Session;
use crate::node::context::Context;
use crate::node::membership::{Claim, GroupKey, PollLease};
use crate::wire::header::RequestHead;
use crate::wire::poll_reply::{poll_wire, PollWindow};
use crate::wire::status;
use crate::wire::status::{from_catalog, identifier};
use bytes::Bytes;
use corelog::{PollFrom, PollReply};
use iggy_binary_protocol::requests::messages::PollMessagesRequest;
use iggy_binary_protocol::KIND_CONSUMER_GROUP;
use iggy_common::{IggyError, RESYNC_REQUIRED_PARTITION_SENTINEL};
use std::sync::Arc;

const OFFSET: u8 = 1;
const TIMESTAMP: u8 = 2;
const FIRST: u8 = 3;
const LAST: u8 = 4;
const NEXT: u8 = 5;

/// The engine is first asked for this many bytes per requested message
/// (at least [`MIN_POLL_BYTES`]); when that holds fewer than `count`
/// messages and the partition has more, it is asked again for what the
/// messages read so far say `count` of them take. The engine always
/// returns at least one whole batch.
const BYTES_PER_MESSAGE: u64 = 1024;
const MIN_POLL_BYTES: u64 = 64 << 10;
/// A reply is never asked for more bytes than this (the client polls
/// again for the rest).
const MAX_POLL_BYTES: u64 = 512 << 20;

/// Who polls: the partition, the engine consumer key, and for a group
/// member the lease on the partition.
struct Poller<'a> {
    index: u32,
    consumer: u64,
    _lease: Option<PollLease<'a>>,
}

/// Serves the poll; with `auto_commit`, stores the last offset sent.
pub(super) async fn poll(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    head: &RequestHead,
    r: PollMessagesRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (s, t) = catalog
        .topic(&r.stream_id, &r.topic_id)
        .map_err(|e| from_catalog(e, &r.stream_id))?;
    let poller = if r.consumer.kind == KIND_CONSUMER_GROUP {
        let Some(g) = t.group(&r.consumer.id) else {
            return match r.partition_id {
                Some(_) => Ok(empty_reply(RESYNC_REQUIRED_PARTITION_SENTINEL, 0)),
                None => Err(no_group(&r.consumer.id, &r.topic_id)),
            };
        };
        let key = GroupKey {
            stream: s.id,
            topic: t.id,
            topic_uid: t.uid,
            group: g.id,
        };
        match ctx
            .groups
            .claim(key, session.connection, partitions_of(t), r.partition_id)
        {
            Claim::Granted(lease) => Poller {
                index: lease.partition,
                consumer: group_consumer(g.id),
                _lease: Some(lease),
            },
            // Fenced: the SDK syncs the member's partitions and polls again.
            Claim::NotOwned => return Ok(empty_reply(RESYNC_REQUIRED_PARTITION_SENTINEL, 0)),
            Claim::NotMember if r.partition_id.is_some() => {
                return Ok(empty_reply(RESYNC_REQUIRED_PARTITION_SENTINEL, 0))
            }
            Claim::NotMember => {
                return Err(IggyError::ConsumerGroupMemberNotFound(
                    u32::try_from(session.connection).unwrap_or(u32::MAX),
                    identifier(&r.consumer.id),
                    identifier(&r.topic_id),
                ))
            }
            Claim::Nothing => return Ok(empty_reply(0, 0)),
            // Its previous owner's poll is still running: nothing yet.
            Claim::Busy(p) => return Ok(empty_reply(p, 0)),
        }
    } else {
        Poller {
            index: r.partition_id.unwrap_or(0),
            consumer: consumer_key(&r.consumer.id),
            _lease: None,
        }
    };
    let partition = t
        .partitions
        .get(poller.index as usize)
        .copied()
        .ok_or_else(|| {
            IggyError::PartitionNotFound(
                poller.index as usize,
                identifier(&r.topic_id),
                identifier(&r.stream_id),
            )
        })?;
    read(ctx, head, &r, partition, &poller).await
}

/// The 16-byte reply of a poll that sends nothing.
fn empty_reply(partition_id: u32, current_offset: u64) -> Outcome {
    let mut body = Vec::with_capacity(16);
    body.extend_from_slice(&partition_id.to_le_bytes());
    body.extend_from_slice(&current_offset.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    Outcome::Body(Bytes::from(body))
}

async fn read(
    ctx: &Arc<Context>,
    head: &RequestHead,
    r: &PollMessagesRequest,
    partition: u64,
    poller: &Poller<'_>,
) -> Result<Outcome, IggyError> {
    let engine_err = |e: corelog::RequestError| status::from_engine(&e);
    let value = r.strategy.value;
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
                .load_offset(partition, poller.consumer)
                .await
                .map_err(engine_err)?;
            let start = stored.map_or(0, |o| o.saturating_add(1));
            (PollFrom::Offset(start), start, stats)
        }
        _ => return Err(IggyError::InvalidCommand),
    };
    let mut budget = (u64::from(r.count).saturating_mul(BYTES_PER_MESSAGE))
        .clamp(MIN_POLL_BYTES, MAX_POLL_BYTES);
    let first = ctx.engine.poll(partition, from, budget);
    let end = stats.await.map_err(engine_err)?;
    let mut reply = first.await.map_err(engine_err)?;
    // Short of `count` with more stored: ask again for enough bytes.
    while let Some(more) = larger_budget(&reply, start, r.count, end.next_offset, budget) {
        budget = more;
        reply = ctx
            .engine
            .poll(partition, from, budget)
            .await
            .map_err(engine_err)?;
    }
    let window = PollWindow {
        start,
        count: r.count,
    };
    // Appends may land between the two answers; never report an end
    // before what the poll returned.
    let current = end.next_offset.max(reply.next_offset()).saturating_sub(1);
    let (wire, summary) = poll_wire(head, reply, window, poller.index, current).map_err(|e| {
        tracing::error!("poll reply: {e}");
        IggyError::CannotReadMessage
    })?;
    if let (true, Some(last)) = (r.auto_commit, summary.last_offset) {
        ctx.store_offset(partition, poller.consumer, last)
            .await
            .map_err(|e| e.status())?;
    }
    Ok(Outcome::Poll(wire))
}

/// The budget to poll again with, when `reply` holds fewer than `count`
/// messages from `start` and the partition has more before `end`; `None`
/// when it is enough (or the budget is at its ceiling).
fn larger_budget(reply: &PollReply, start: u64, count: u32, end: u64, budget: u64) -> Option<u64> {
    let from = start.max(reply.first_offset());
    let held = reply.next_offset().saturating_sub(from);
    if reply.is_empty()
        || held >= u64::from(count)
        || reply.next_offset() >= end
        || budget >= MAX_POLL_BYTES
    {
        return None;
    }
    // Bytes per message so far, for all `count`, with a quarter to spare.
    let per_message = reply.len() / held.max(1) + 1;
    let wanted = per_message
        .saturating_mul(u64::from(count))
        .saturating_mul(5)
        / 4;
    Some(wanted.max(budget.saturating_mul(2)).min(MAX_POLL_BYTES))
}
