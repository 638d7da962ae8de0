//! LOGIN_REGISTER (password or personal access token) and LOGOUT_USER.
//! The check runs on the login pool, throttled per peer address (see
//! [`crate::guard::login`]).

use super::outcome::Outcome;
use crate::catalog::accounts::{ROOT_USER_ID, STATUS_INACTIVE};
use crate::catalog::model::Catalog;
use crate::catalog::model::TOKEN_LOOKUP_LEN;
use crate::catalog::root::verify_hash;
use crate::guard::counters::Counters;
use crate::guard::login::Attempt;
use crate::node::context::{now_micros, Context};
use crate::node::registry::NO_USER;
use crate::wire::request::Login;
use iggy_binary_protocol::responses::users::LoginRegisterResponse;
use iggy_binary_protocol::{WireName, IGGY_PROTOCOL_VERSION};
use iggy_common::IggyError;
use std::sync::Arc;

/// A connection's sign-in state.
#[derive(Debug)]
pub struct Session {
    /// The session number once signed in.
    pub id: Option<u64>,
    /// The connection's number (its client id): its id as a
    /// consumer-group member.
    pub connection: u64,
    /// The signed-in user ([`crate::node::registry::NO_USER`] when none).
    pub user: u32,
    /// The personal access token it signed in with, if it did: the
    /// session ends when the token is deleted or expires.
    pub token: Option<String>,
    /// The connection's entry in the client registry.
    pub client: Option<Arc<crate::node::registry::Client>>,
    /// The client's address (sign-in failures are throttled by it).
    pub peer: Option<std::net::IpAddr>,
    /// Failed sign-ins on this connection.
    pub failed_logins: u32,
    /// It joined a consumer group (and may have left since): while it is a
    /// member, silence past the heartbeat threshold evicts it.
    pub joined: bool,
    /// The last send's request number and the partition index balanced
    /// partitioning picked for it: a repeat of that send (Iggy's SDK
    /// repeats one whose outcome it does not know) goes to the same one.
    pub balanced: Option<(u64, u32)>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            id: None,
            connection: 0,
            user: crate::node::registry::NO_USER,
            token: None,
            client: None,
            peer: None,
            failed_logins: 0,
            joined: false,
            balanced: None,
        }
    }
}

/// The server version the login reply names.
const SERVER_VERSION: &str = concat!("corelog-server ", env!("CARGO_PKG_VERSION"));

/// Who a sign-in claims to be: the user, the hash to check the secret
/// against, and the user's status.
struct Candidate {
    user: u32,
    hash: String,
    status: u8,
    /// The token's name, when the secret is a personal access token.
    token: Option<String>,
}

/// Checks the credentials, then the token (on the login pool), and opens
/// a session for the user they belong to.
pub(super) async fn login(ctx: &Arc<Context>, session: &mut Session, login: Login) -> Outcome {
    sign_out(session);
    let catalog = ctx.metadata.snapshot();
    let mut refusal = None;
    if let Some((username, password)) = login.credentials {
        // An unknown name is checked against the root hash too (and fails),
        // so it takes as long as a wrong password.
        let c = by_password(ctx, &catalog, &username).unwrap_or(Candidate {
            user: NO_USER,
            hash: ctx.users.hash().to_owned(),
            status: 0,
            token: None,
        });
        match check(ctx, session, &username, c, password).await {
            Ok((user, _)) => return signed_in(ctx, session, user, None),
            Err(e) => refusal = Some(e),
        }
    }
    if let Some(token) = login.token {
        let checked = match by_token(&catalog, &token, now_micros()) {
            Ok(c) => check(ctx, session, "(personal access token)", c, token).await,
            Err(e) => Err(e),
        };
        match checked {
            Ok((user, token)) => return signed_in(ctx, session, user, token),
            Err(e) => refusal = refusal.or(Some(e)),
        }
    }
    let refusal = refusal.unwrap_or(IggyError::InvalidCredentials);
    // A hash refused undone (the pool busy) was no guess: not counted.
    if refusal != BUSY {
        session.failed_logins += 1;
    }
    Outcome::Error(refusal)
}

/// The root user or the stored user named `username`.
fn by_password(ctx: &Context, catalog: &Catalog, username: &str) -> Option<Candidate> {
    if username == ctx.users.username() {
        return Some(Candidate {
            user: ROOT_USER_ID,
            hash: ctx.users.hash().to_owned(),
            status: 0,
            token: None,
        });
    }
    let u = catalog.users.iter().find(|u| u.username == username)?;
    Some(Candidate {
        user: u.id,
        hash: u.password_hash.clone(),
        status: u.status,
        token: None,
    })
}

/// The token whose lookup key `token` starts with, if it has not expired.
fn by_token(catalog: &Catalog, token: &str, now: u64) -> Result<Candidate, IggyError> {
    let lookup = token
        .get(..TOKEN_LOOKUP_LEN)
        .ok_or(IggyError::InvalidPersonalAccessToken)?;
    let (user, meta) = catalog
        .all_tokens()
        .find(|(_, t)| t.lookup == lookup)
        .ok_or(IggyError::InvalidPersonalAccessToken)?;
    if meta.expired(now) {
        return Err(IggyError::PersonalAccessTokenExpired(
            meta.name.clone(),
            user,
        ));
    }
    let status = catalog.user_by_id(user).map_or(0, |u| u.status);
    Ok(Candidate {
        user,
        hash: meta.hash.clone(),
        status,
        token: Some(meta.name.clone()),
    })
}

/// Verifies `secret` against the candidate's hash on the login pool,
/// unless the peer is throttled.
async fn check(
    ctx: &Context,
    session: &Session,
    who: &str,
    c: Candidate,
    secret: String,
) -> Result<(u32, Option<String>), IggyError> {
    let (hash, known) = (c.hash, c.user != NO_USER);
    verified(ctx, session, who, move || {
        verify_hash(&hash, &secret) && known
    })
    .await?;
    if c.status == STATUS_INACTIVE {
        return Err(IggyError::UserInactive);
    }
    Ok((c.user, c.token))
}

/// Runs `check` (a password or token hash) as a sign-in's check is run: on
/// the login pool, unless the peer address is throttled, and counted when
/// it fails. Also CHANGE_PASSWORD's check of the current password.
pub(super) async fn verified(
    ctx: &Context,
    session: &Session,
    who: &str,
    check: impl FnOnce() -> bool + Send + 'static,
) -> Result<(), IggyError> {
    let attempt = ctx.logins.attempt(session.peer, who, check).await;
    if attempt != Attempt::SignedIn {
        let counter = match attempt {
            Attempt::Throttled => &ctx.counters.logins_throttled,
            Attempt::Busy => &ctx.counters.hashes_busy,
            _ => &ctx.counters.logins_failed,
        };
        Counters::add(counter, 1);
        if attempt == Attempt::Busy {
            return Err(BUSY);
        }
        return Err(IggyError::InvalidCredentials);
    }
    Ok(())
}

/// The answer to a check or hash the pool refused undone (busy): not a
/// wrong password, and the client may try again.
pub(super) const BUSY: IggyError = IggyError::TaskTimeout;

fn signed_in(ctx: &Context, session: &mut Session, user: u32, token: Option<String>) -> Outcome {
    let id = ctx.next_session();
    session.id = Some(id);
    session.user = user;
    session.token = token;
    if let Some(client) = &session.client {
        client.set_user(user);
    }
    let Ok(server_version) = WireName::new(SERVER_VERSION) else {
        return Outcome::Error(IggyError::InvalidConfiguration);
    };
    Outcome::encoded(&LoginRegisterResponse {
        user_id: user,
        session: id,
        server_protocol_version: IGGY_PROTOCOL_VERSION,
        server_version,
    })
}

/// Whether a session signed in with a token may go on: its token is still
/// there and has not expired (a session signed in with a password: yes).
pub(super) fn token_lives(catalog: &Catalog, session: &Session, now: u64) -> bool {
    session.token.as_ref().is_none_or(|name| {
        catalog
            .tokens_of(session.user)
            .iter()
            .any(|t| &t.name == name && !t.expired(now))
    })
}

pub(super) fn sign_out(session: &mut Session) {
    session.id = None;
    session.user = NO_USER;
    session.token = None;
    if let Some(client) = &session.client {
        client.set_user(NO_USER);
    }
}

/// Closes the session; the connection stays open.
pub(super) fn logout(session: &mut Session) -> Outcome {
    sign_out(session);
    Outcome::empty()
}
