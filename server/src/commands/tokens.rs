//! GET/CREATE/DELETE_PERSONAL_ACCESS_TOKEN(S), always the caller's own. A
//! token is 48 random hex digits; the catalog keeps its first 12 (to find
//! it at sign-in) and the argon2 hash of the whole, never the token.

use super::authz::Authorized;
use super::change_error::AccountUpdate;
use super::outcome::Outcome;
use crate::catalog::accounts::AccountError;
use crate::catalog::model::{TokenMeta, TOKEN_LOOKUP_LEN};
use crate::catalog::root::new_token;
use crate::node::context::{now_micros, Context};
use iggy_binary_protocol::requests::personal_access_tokens::CreatePersonalAccessTokenRequest;
use iggy_binary_protocol::responses::personal_access_tokens::{
    GetPersonalAccessTokensResponse, PersonalAccessTokenResponse, RawPersonalAccessTokenResponse,
};
use iggy_binary_protocol::WireName;
use iggy_common::IggyError;
use std::sync::Arc;

/// Iggy's bounds on a token's name.
const NAME_LEN: std::ops::RangeInclusive<usize> = 3..=30;

/// Draws of a token whose lookup key is taken before giving up (a clash
/// is a 1 in 2^48 event).
const DRAWS: usize = 3;

/// The caller's tokens that have not expired.
pub(super) fn get_all(a: &Authorized) -> Outcome {
    let (catalog, user) = (a.catalog(), a.user());
    let now = now_micros();
    let tokens = catalog
        .tokens_of(user)
        .iter()
        .filter(|t| !t.expired(now))
        .filter_map(|t| {
            Some(PersonalAccessTokenResponse {
                name: WireName::new(t.name.as_str()).ok()?,
                expiry_at: t.expiry_at.unwrap_or(0),
            })
        })
        .collect();
    Outcome::encoded(&GetPersonalAccessTokensResponse { tokens })
}

/// When a token asked to live `expiry` µs (Iggy's `IggyExpiry` on the
/// wire: 0 the server's default, `u64::MAX` never) stops working.
fn expiry_at(expiry: u64, now: u64) -> Result<Option<u64>, IggyError> {
    match expiry {
        // The server's default is to never expire, as Iggy's.
        0 | u64::MAX => Ok(None),
        micros => now
            .checked_add(micros)
            .map(Some)
            .ok_or(IggyError::InvalidPersonalAccessTokenExpiry),
    }
}

/// Makes a token for the caller; answers it (the only time it is seen).
pub(super) async fn create(
    ctx: &Arc<Context>,
    a: &Authorized,
    peer: Option<std::net::IpAddr>,
    r: CreatePersonalAccessTokenRequest,
) -> Result<Outcome, IggyError> {
    let user = a.user();
    let name = r.name.as_str().to_owned();
    if !NAME_LEN.contains(&name.len()) {
        return Err(IggyError::InvalidPersonalAccessTokenName);
    }
    let now = now_micros();
    let expiry_at = expiry_at(r.expiry, now)?;
    // Refused before any hashing: a duplicate name or a full set of tokens
    // costs no argon2 work (the change checks again, under its lock).
    a.catalog()
        .token_room(user, &name, now)
        .map_err(|e| AccountUpdate::Refused(e).status())?;
    for _ in 0..DRAWS {
        let token = new_token();
        let hash = super::users::hash(ctx, peer, token.clone()).await?;
        let meta = TokenMeta {
            name: name.clone(),
            lookup: token.get(..TOKEN_LOOKUP_LEN).unwrap_or_default().to_owned(),
            hash,
            expiry_at,
        };
        let added = ctx
            .update_catalog(a, |c| -> Result<(), AccountUpdate> {
                Ok(c.add_token(user, meta, now)?)
            })
            .await;
        match added {
            Ok(()) => {
                let token = WireName::new(token).map_err(|_| IggyError::Error)?;
                return Ok(Outcome::encoded(&RawPersonalAccessTokenResponse { token }));
            }
            Err(AccountUpdate::Refused(AccountError::LookupTaken)) => continue,
            Err(e) => return Err(e.status()),
        }
    }
    Err(IggyError::Error)
}

/// Deletes the caller's token `name`.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    name: &WireName,
) -> Result<Outcome, IggyError> {
    ctx.update_catalog(a, |c| -> Result<(), AccountUpdate> {
        Ok(c.remove_token(a.user(), name.as_str())?)
    })
    .await
    .map_err(AccountUpdate::status)?;
    Ok(Outcome::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_follows_iggy_expiry() {
        assert_eq!(expiry_at(0, 10), Ok(None));
        assert_eq!(expiry_at(u64::MAX, 10), Ok(None));
        assert_eq!(expiry_at(5, 10), Ok(Some(15)));
        assert!(expiry_at(u64::MAX - 1, 10).is_err());
    }
}
