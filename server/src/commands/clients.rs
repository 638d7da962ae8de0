//! GET_ME, GET_CLIENT, GET_CLIENTS from the client registry.

use super::outcome::Outcome;
use super::session::Session;
use crate::node::context::Context;
use crate::node::registry::Client;
use iggy_binary_protocol::responses::clients::{
    ClientDetailsResponse, ClientResponse, ConsumerGroupInfoResponse, GetClientsResponse,
};
use iggy_common::IggyError;
use std::sync::Arc;

/// The consumer groups client `c` is a member of (its id is its
/// connection's member id).
fn groups(ctx: &Context, c: &Client) -> Vec<ConsumerGroupInfoResponse> {
    ctx.groups
        .groups_of(u64::from(c.id))
        .into_iter()
        .map(|k| ConsumerGroupInfoResponse {
            stream_id: k.stream,
            topic_id: k.topic,
            group_id: k.group,
        })
        .collect()
}

fn header(ctx: &Context, c: &Client) -> ClientResponse {
    ClientResponse {
        client_id: c.id,
        user_id: c.user(),
        transport: c.transport,
        address: c.address.clone(),
        consumer_groups_count: u32::try_from(groups(ctx, c).len()).unwrap_or(u32::MAX),
    }
}

fn details(ctx: &Context, c: &Client) -> ClientDetailsResponse {
    ClientDetailsResponse {
        client: header(ctx, c),
        consumer_groups: groups(ctx, c),
    }
}

/// The caller's own connection.
pub(super) fn get_me(ctx: &Context, session: &Session) -> Outcome {
    match &session.client {
        Some(c) => Outcome::encoded(&details(ctx, c)),
        None => Outcome::Error(IggyError::ClientNotFound(0)),
    }
}

/// Every connected client.
pub(super) fn get_all(ctx: &Arc<Context>) -> Outcome {
    let clients = ctx.clients.list().iter().map(|c| header(ctx, c)).collect();
    Outcome::encoded(&GetClientsResponse { clients })
}

/// Client `id`; an empty body when it is not connected.
pub(super) fn get(ctx: &Arc<Context>, id: u32) -> Outcome {
    ctx.clients
        .get(id)
        .map_or_else(Outcome::empty, |c| Outcome::encoded(&details(ctx, &c)))
}
