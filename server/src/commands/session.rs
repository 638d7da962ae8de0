//! LOGIN_REGISTER and LOGOUT_USER.

use super::{Outcome, Session};
use crate::context::Context;
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
    if !ctx.users.verify_off_thread(username, password).await {
        tracing::warn!("refused sign-in of {who:?}: wrong username or password");
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
