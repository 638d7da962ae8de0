//! Consumer groups: CREATE, DELETE, GET, GET_ALL (definitions in the
//! catalog), JOIN, LEAVE and SYNC (membership, per connection, in memory:
//! `membership.rs`).

use super::authz::Authorized;
use super::change_error::UpdateError;
use super::outcome::Outcome;
use super::session::Session;
use crate::catalog::model::GroupMeta;
use crate::catalog::model::{Catalog, TopicMeta};
use crate::node::context::Context;
use crate::node::membership::GroupKey;
use crate::wire::status::{from_catalog, identifier};
use iggy_binary_protocol::requests::consumer_groups::{
    CreateConsumerGroupRequest, DeleteConsumerGroupRequest, GetConsumerGroupRequest,
    GetConsumerGroupsRequest, JoinConsumerGroupRequest, LeaveConsumerGroupRequest,
    SyncConsumerGroupRequest,
};
use iggy_binary_protocol::responses::consumer_groups::{
    ConsumerGroupDetailsResponse, ConsumerGroupMemberResponse, ConsumerGroupResponse,
    GetConsumerGroupsResponse, SyncConsumerGroupResponse,
};
use iggy_binary_protocol::{WireIdentifier, WireName};
use iggy_common::IggyError;
use std::sync::Arc;

/// The bit that marks a group's key among a partition's consumer offsets.
const GROUP_BIT: u64 = 1 << 62;

/// The engine's consumer id for group `id`'s offsets: its own quarter of
/// the id space, apart from consumers' (see `offsets::consumer_key`).
pub(super) fn group_consumer(id: u32) -> u64 {
    GROUP_BIT | u64::from(id)
}

/// A partition count as the wire carries it.
pub(super) fn count(t: &TopicMeta) -> u32 {
    u32::try_from(t.partitions.len()).unwrap_or(u32::MAX)
}

/// The status for a group the catalog does not hold: Iggy answers
/// ConsumerGroupIdNotFound (5000) whether the group is named by id or name.
pub(super) fn no_group(group: &WireIdentifier, topic: &WireIdentifier) -> IggyError {
    IggyError::ConsumerGroupIdNotFound(identifier(group), identifier(topic))
}

/// The topic and the group the identifiers name, and the group's key.
pub(super) fn resolve<'c>(
    catalog: &'c Catalog,
    stream: &WireIdentifier,
    topic: &WireIdentifier,
    group: &WireIdentifier,
) -> Result<(&'c TopicMeta, &'c GroupMeta, GroupKey), IggyError> {
    let (s, t) = catalog
        .topic(stream, topic)
        .map_err(|e| from_catalog(e, stream))?;
    let g = t.group(group).ok_or_else(|| no_group(group, topic))?;
    let key = GroupKey {
        stream: s.id,
        topic: t.id,
        topic_uid: t.uid,
        group: g.id,
    };
    Ok((t, g, key))
}

fn details(
    ctx: &Context,
    t: &TopicMeta,
    g: &GroupMeta,
    key: GroupKey,
) -> Result<ConsumerGroupDetailsResponse, IggyError> {
    let members: Vec<ConsumerGroupMemberResponse> = ctx
        .groups
        .members(key, count(t))
        .into_iter()
        .map(|(connection, partitions)| ConsumerGroupMemberResponse {
            id: member_id(connection),
            partitions_count: u32::try_from(partitions.len()).unwrap_or(u32::MAX),
            partitions,
        })
        .collect();
    Ok(ConsumerGroupDetailsResponse {
        group: header(t, g, members.len())?,
        members,
    })
}

fn header(
    t: &TopicMeta,
    g: &GroupMeta,
    members: usize,
) -> Result<ConsumerGroupResponse, IggyError> {
    Ok(ConsumerGroupResponse {
        id: g.id,
        partitions_count: count(t),
        members_count: u32::try_from(members).unwrap_or(u32::MAX),
        name: WireName::new(g.name.as_str()).map_err(|_| IggyError::InvalidConsumerGroupName)?,
    })
}

/// A member's id on the wire: its connection number.
fn member_id(connection: u64) -> u32 {
    u32::try_from(connection).unwrap_or(u32::MAX)
}

/// Records a new group durably; answers its details.
pub(super) async fn create(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: CreateConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let name = r.name.as_str();
    let group = ctx
        .update_catalog(a, |c| -> Result<_, UpdateError> {
            let max = ctx.limits.max_consumer_groups;
            Ok(c.add_group(&r.stream_id, &r.topic_id, name, max)?)
        })
        .await
        .map_err(|e| e.status(&r.stream_id))?;
    let catalog = ctx.metadata.snapshot();
    let id = WireIdentifier::Numeric(group.id);
    let (t, g, key) = resolve(&catalog, &r.stream_id, &r.topic_id, &id)?;
    Ok(Outcome::encoded(&details(ctx, t, g, key)?))
}

/// Forgets the group (durably) and its members, then its stored offsets.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: DeleteConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (t, _, key) = resolve(catalog, &r.stream_id, &r.topic_id, &r.group_id)?;
    let partitions = t.partitions.clone();
    ctx.update_catalog(a, |c| -> Result<_, UpdateError> {
        Ok(c.remove_group(&r.stream_id, &r.topic_id, &r.group_id)?)
    })
    .await
    .map_err(|e| match e {
        UpdateError::Catalog(crate::catalog::model::CatalogError::NoGroup { .. }) => {
            no_group(&r.group_id, &r.topic_id)
        }
        e => e.status(&r.stream_id),
    })?;
    ctx.groups.forget(key);
    // Its id is never given again, so offsets left behind by a failure
    // here are never read; they are deleted with the topic.
    for p in partitions {
        if let Err(e) = ctx.delete_offset(p, group_consumer(key.group)).await {
            tracing::warn!("deleting group {} offsets in partition {p}: {e}", key.group);
        }
    }
    Ok(Outcome::empty())
}

/// The group with its members; an empty body when there is none.
pub(super) async fn get(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: GetConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let Ok((t, g, key)) = resolve(catalog, &r.stream_id, &r.topic_id, &r.group_id) else {
        return Ok(Outcome::empty());
    };
    Ok(Outcome::encoded(&details(ctx, t, g, key)?))
}

/// Every group of the topic.
pub(super) async fn get_all(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: GetConsumerGroupsRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (s, t) = catalog
        .topic(&r.stream_id, &r.topic_id)
        .map_err(|e| from_catalog(e, &r.stream_id))?;
    let mut groups = Vec::with_capacity(t.groups.len());
    for g in &t.groups {
        let key = GroupKey {
            stream: s.id,
            topic: t.id,
            topic_uid: t.uid,
            group: g.id,
        };
        groups.push(header(t, g, ctx.groups.members(key, count(t)).len())?);
    }
    Ok(Outcome::encoded(&GetConsumerGroupsResponse { groups }))
}

/// Makes the connection a member (again: a second join changes nothing).
pub(super) async fn join(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &mut Session,
    r: JoinConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (t, _, key) = resolve(catalog, &r.stream_id, &r.topic_id, &r.group_id)?;
    ctx.groups.join(key, session.connection, count(t));
    session.joined = true;
    Ok(Outcome::empty())
}

/// Ends the connection's membership.
pub(super) async fn leave(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    r: LeaveConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let (_, _, key) = resolve(catalog, &r.stream_id, &r.topic_id, &r.group_id)?;
    if !ctx.groups.leave(key, session.connection) {
        return Err(IggyError::ConsumerGroupMemberNotFound(
            member_id(session.connection),
            identifier(&r.group_id),
            identifier(&r.topic_id),
        ));
    }
    Ok(Outcome::empty())
}

/// The generation and the member's partitions; an empty body when the
/// connection is no member (or there is no such group).
pub(super) async fn sync(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &Session,
    r: SyncConsumerGroupRequest,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let Ok((t, _, key)) = resolve(catalog, &r.stream_id, &r.topic_id, &r.group_id) else {
        return Ok(Outcome::empty());
    };
    Ok(
        match ctx.groups.assignment(key, session.connection, count(t)) {
            Some((generation, partitions)) => Outcome::encoded(&SyncConsumerGroupResponse {
                generation,
                partitions,
            }),
            None => Outcome::empty(),
        },
    )
}
