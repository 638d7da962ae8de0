//! LOGIN_REGISTER and LOGOUT_USER. The password check runs on the login
//! pool, throttled per peer address (see [`crate::login`]).

use super::{Outcome, Session};
use crate::context::Context;
use crate::counters::Counters;
use crate::login::Attempt;
use iggy_binary_protocol::responses::users::LoginRegisterResponse;
use iggy_binary_protocol::{WireName, IGGY_PROTOCOL_VERSION};
use iggy_common::IggyError;
use std::sync::Arc;

/// The server version the login reply names.
const SERVER_VERSION: &str = concat!("corelog-server ", env!("CARGO_PKG_VERSION"));

/// Checks the credentials (off the shard) and opens a session.
pub(super) async fn login(
    ctx: &Arc<Context>,
    session: &mut Session,
    username: String,
    password: String,
) -> Outcome {
    let who = username.clone();
    let users = ctx.users.clone();
    let check = move || users.verify(&username, &password);
    let attempt = ctx.logins.attempt(session.peer, &who, check).await;
    if attempt != Attempt::SignedIn {
        let counter = match attempt {
            Attempt::Throttled => &ctx.counters.logins_throttled,
            _ => &ctx.counters.logins_failed,
        };
        Counters::add(counter, 1);
        session.failed_logins += 1;
        session.id = None;
        return Outcome::Error(IggyError::InvalidCredentials);
    }
    let id = ctx.next_session();
    session.id = Some(id);
    let Ok(server_version) = WireName::new(SERVER_VERSION) else {
        return Outcome::Error(IggyError::InvalidConfiguration);
    };
    Outcome::encoded(&LoginRegisterResponse {
        user_id: 0,
        session: id,
        server_protocol_version: IGGY_PROTOCOL_VERSION,
        server_version,
    })
}

/// Closes the session; the connection stays open.
pub(super) fn logout(session: &mut Session) -> Outcome {
    session.id = None;
    Outcome::empty()
}
