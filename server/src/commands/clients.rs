//! GET_ME, GET_CLIENT, GET_CLIENTS from the client registry.

use super::{Outcome, Session};
use crate::clients::Client;
use crate::context::Context;
use iggy_binary_protocol::responses::clients::{
    ClientDetailsResponse, ClientResponse, GetClientsResponse,
};
use iggy_common::IggyError;
use std::sync::Arc;

fn header(c: &Client) -> ClientResponse {
    ClientResponse {
        client_id: c.id,
        user_id: c.user(),
        transport: c.transport,
        address: c.address.clone(),
        consumer_groups_count: 0,
    }
}

fn details(c: &Client) -> ClientDetailsResponse {
    ClientDetailsResponse {
        client: header(c),
        consumer_groups: Vec::new(),
    }
}

/// The caller's own connection.
pub(super) fn get_me(session: &Session) -> Outcome {
    match &session.client {
        Some(c) => Outcome::encoded(&details(c)),
        None => Outcome::Error(IggyError::ClientNotFound(0)),
    }
}

/// Every connected client.
pub(super) fn get_all(ctx: &Arc<Context>) -> Outcome {
    let clients = ctx.clients.list().iter().map(|c| header(c)).collect();
    Outcome::encoded(&GetClientsResponse { clients })
}

/// Client `id`; an empty body when it is not connected.
pub(super) fn get(ctx: &Arc<Context>, id: u32) -> Outcome {
    ctx.clients
        .get(id)
        .map_or_else(Outcome::empty, |c| Outcome::encoded(&details(&c)))
}
