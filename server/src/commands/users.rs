//! GET_USER(S), CREATE_USER, DELETE_USER, UPDATE_USER, UPDATE_PERMISSIONS,
//! CHANGE_PASSWORD. Passwords are hashed (argon2, off the shard) before the
//! catalog change, which is then deterministic.

use super::authz::Authorized;
use super::change_error::AccountUpdate;
use super::outcome::Outcome;
use super::session::Session;
use crate::catalog::accounts::{NewUser, ROOT_USER_ID, STATUS_ACTIVE, STATUS_INACTIVE};
use crate::catalog::model::{Catalog, UserMeta};
use crate::catalog::permissions::Permissions;
use crate::catalog::root::{hash_secret, verify_hash};
use crate::guard::counters::Counters;
use crate::guard::login::fair::Refused;
use crate::node::context::{now_micros, Context};
use iggy_binary_protocol::requests::users::{
    ChangePasswordRequest, CreateUserRequest, UpdatePermissionsRequest, UpdateUserRequest,
};
use iggy_binary_protocol::responses::users::{GetUsersResponse, UserDetailsResponse, UserResponse};
use iggy_binary_protocol::{WireIdentifier, WireName, WireOptions, WirePermissions};
use iggy_common::IggyError;
use std::net::IpAddr;
use std::sync::Arc;

/// Iggy's bounds on names and passwords (`iggy_common` users defaults).
const USERNAME_LEN: std::ops::RangeInclusive<usize> = 3..=50;
const PASSWORD_LEN: std::ops::RangeInclusive<usize> = 3..=100;

/// The user `id` names: `Some(ROOT_USER_ID)` for the root user.
fn resolve(ctx: &Context, catalog: &Catalog, id: &WireIdentifier) -> Option<u32> {
    let root = match id {
        WireIdentifier::Numeric(n) => *n == ROOT_USER_ID,
        WireIdentifier::String(name) => name.as_str() == ctx.users.username(),
    };
    if root {
        return Some(ROOT_USER_ID);
    }
    catalog.user(id).map(|u| u.id)
}

fn header(
    id: u32,
    created_at: u64,
    status: u8,
    name: &str,
    options: &[u8],
) -> Result<UserResponse, IggyError> {
    Ok(UserResponse {
        id,
        created_at,
        status,
        username: WireName::new(name).map_err(|_| IggyError::InvalidUsername)?,
        options: WireOptions::from_validated(options.to_vec().into()),
    })
}

fn root_details(ctx: &Context) -> Result<UserDetailsResponse, IggyError> {
    Ok(UserDetailsResponse {
        user: header(
            ROOT_USER_ID,
            ctx.started_at,
            STATUS_ACTIVE,
            ctx.users.username(),
            &[],
        )?,
        permissions: Some(WirePermissions::from(&Permissions::all())),
    })
}

fn details(u: &UserMeta) -> Result<UserDetailsResponse, IggyError> {
    Ok(UserDetailsResponse {
        user: header(u.id, u.created_at, u.status, &u.username, &u.options)?,
        permissions: u.permissions.as_ref().map(WirePermissions::from),
    })
}

/// Every user, root first.
pub(super) fn get_all(ctx: &Arc<Context>, a: &Authorized) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    let mut users = vec![root_details(ctx)?.user];
    for u in &catalog.users {
        users.push(details(u)?.user);
    }
    Ok(Outcome::encoded(&GetUsersResponse { users }))
}

/// The user with its permissions; an empty body when there is none.
pub(super) fn get(
    ctx: &Arc<Context>,
    a: &Authorized,
    id: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let catalog = a.catalog();
    Ok(match resolve(ctx, catalog, id) {
        Some(ROOT_USER_ID) => Outcome::encoded(&root_details(ctx)?),
        Some(_) => match catalog.user(id) {
            Some(u) => Outcome::encoded(&details(u)?),
            None => Outcome::empty(),
        },
        None => Outcome::empty(),
    })
}

fn check_username(name: &str) -> Result<(), IggyError> {
    if USERNAME_LEN.contains(&name.len()) {
        Ok(())
    } else {
        Err(IggyError::InvalidUsername)
    }
}

fn check_password(password: &str) -> Result<(), IggyError> {
    if PASSWORD_LEN.contains(&password.len()) {
        Ok(())
    } else {
        Err(IggyError::InvalidPassword)
    }
}

/// Users have no option keys (as in Iggy's catalog at the pinned commit):
/// any key is refused rather than stored where nothing reads it.
fn check_options(options: &WireOptions) -> Result<(), IggyError> {
    if options.is_empty() {
        Ok(())
    } else {
        Err(IggyError::UnsupportedOptionKey(
            "users have no options".into(),
        ))
    }
}

fn check_status(status: u8) -> Result<u8, IggyError> {
    match status {
        STATUS_ACTIVE | STATUS_INACTIVE => Ok(status),
        _ => Err(IggyError::InvalidUserStatus),
    }
}

/// argon2 of `secret` on the login pool, in `peer`'s turn (the one budget
/// every hash shares: `guard/login/fair.rs`).
pub(super) async fn hash(
    ctx: &Context,
    peer: Option<IpAddr>,
    secret: String,
) -> Result<String, IggyError> {
    match ctx.logins.run(peer, move || hash_secret(&secret)).await {
        Ok(Ok(h)) => Ok(h),
        Ok(Err(e)) => {
            tracing::error!("{e}");
            Err(IggyError::Error)
        }
        Err(Refused::Busy) => {
            Counters::add(&ctx.counters.hashes_busy, 1);
            Err(super::session::BUSY)
        }
        Err(Refused::Closed) => Err(IggyError::Error),
    }
}

/// Records a new user durably; answers its details.
pub(super) async fn create(
    ctx: &Arc<Context>,
    a: &Authorized,
    peer: Option<IpAddr>,
    r: CreateUserRequest,
) -> Result<Outcome, IggyError> {
    check_username(r.username.as_str())?;
    check_password(&r.password)?;
    check_options(&r.options)?;
    let status = check_status(r.status)?;
    let new = NewUser {
        username: r.username.as_str().to_owned(),
        password_hash: hash(ctx, peer, r.password).await?,
        status,
        permissions: r.permissions.as_ref().map(Permissions::from),
        options: r.options.as_bytes().to_vec(),
        created_at: now_micros(),
    };
    let root_name = ctx.users.username().to_owned();
    let id = ctx
        .update_catalog(a, |c| -> Result<u32, AccountUpdate> {
            Ok(c.add_user(new, &root_name)?)
        })
        .await
        .map_err(AccountUpdate::status)?;
    let catalog = ctx.metadata.snapshot();
    let u = catalog.user_by_id(id).ok_or(IggyError::Error)?;
    Ok(Outcome::encoded(&details(u)?))
}

/// Forgets the user and its tokens; its open sessions can do nothing more.
pub(super) async fn delete(
    ctx: &Arc<Context>,
    a: &Authorized,
    id: &WireIdentifier,
) -> Result<Outcome, IggyError> {
    let target = resolve(ctx, a.catalog(), id)
        .ok_or_else(|| IggyError::ResourceNotFound(format!("user {id}")))?;
    if target == ROOT_USER_ID {
        return Err(IggyError::CannotDeleteUser(ROOT_USER_ID));
    }
    ctx.update_catalog(a, |c| -> Result<(), AccountUpdate> {
        Ok(c.remove_user(target)?)
    })
    .await
    .map_err(AccountUpdate::status)?;
    Ok(Outcome::empty())
}

/// Renames the user and/or sets its status. The root user is configured,
/// not stored: it cannot be changed here.
pub(super) async fn update(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: UpdateUserRequest,
) -> Result<Outcome, IggyError> {
    let target = stored_user(ctx, a.catalog(), &r.user_id)?;
    check_options(&r.options)?;
    if let Some(name) = &r.username {
        check_username(name.as_str())?;
    }
    let status = r.status.map(check_status).transpose()?;
    let username = r.username.map(|n| n.as_str().to_owned());
    let root_name = ctx.users.username().to_owned();
    ctx.update_catalog(a, |c| -> Result<(), AccountUpdate> {
        Ok(c.update_user(target, username, status, &root_name)?)
    })
    .await
    .map_err(AccountUpdate::status)?;
    Ok(Outcome::empty())
}

/// Replaces the user's grants; the root user's are fixed.
pub(super) async fn update_permissions(
    ctx: &Arc<Context>,
    a: &Authorized,
    r: UpdatePermissionsRequest,
) -> Result<Outcome, IggyError> {
    let target = resolve(ctx, a.catalog(), &r.user_id)
        .ok_or_else(|| IggyError::ResourceNotFound(format!("user {}", r.user_id)))?;
    if target == ROOT_USER_ID {
        return Err(IggyError::CannotChangePermissions(ROOT_USER_ID));
    }
    let permissions = r.permissions.as_ref().map(Permissions::from);
    ctx.update_catalog(a, |c| -> Result<(), AccountUpdate> {
        Ok(c.set_permissions(target, permissions)?)
    })
    .await
    .map_err(AccountUpdate::status)?;
    Ok(Outcome::empty())
}

/// Checks the current password, then stores the new one's hash (if the
/// password did not change meanwhile).
///
/// The current password is checked as a sign-in is: throttled per peer
/// address, and a wrong one counts toward the connection's
/// `max_failed_logins` (else CHANGE_PASSWORD would be an unthrottled
/// oracle for the account's password).
pub(super) async fn change_password(
    ctx: &Arc<Context>,
    a: &Authorized,
    session: &mut Session,
    r: ChangePasswordRequest,
) -> Result<Outcome, IggyError> {
    let target = stored_user(ctx, a.catalog(), &r.user_id)?;
    check_password(&r.new_password)?;
    let current = a
        .catalog()
        .user_by_id(target)
        .map(|u| u.password_hash.clone())
        .ok_or_else(|| IggyError::ResourceNotFound(format!("user {target}")))?;
    let checked = current.clone();
    let password = r.current_password;
    let who = format!("user {target} (changing its password)");
    let check = move || verify_hash(&checked, &password);
    if let Err(e) = super::session::verified(ctx, session, &who, check).await {
        if e != super::session::BUSY {
            session.failed_logins += 1;
        }
        return Err(e);
    }
    let new_hash = hash(ctx, session.peer, r.new_password).await?;
    ctx.update_catalog(a, |c| -> Result<(), AccountUpdate> {
        Ok(c.set_password(target, &current, new_hash)?)
    })
    .await
    .map_err(AccountUpdate::status)?;
    Ok(Outcome::empty())
}

/// A stored (not root) user's id: the root user's name and password come
/// from the server's configuration and cannot be changed over the wire.
fn stored_user(ctx: &Context, catalog: &Catalog, id: &WireIdentifier) -> Result<u32, IggyError> {
    match resolve(ctx, catalog, id) {
        Some(ROOT_USER_ID) => Err(IggyError::FeatureUnavailable),
        Some(target) => Ok(target),
        None => Err(IggyError::ResourceNotFound(format!("user {id}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Iggy's bounds, 3 to 50 bytes of name and 3 to 100 of password, each
    /// at its edges, and a user's options refused unless there are none.
    #[test]
    fn names_passwords_and_options_are_checked_at_their_bounds() {
        let name = |n: usize| "u".repeat(n);
        for n in [3, 50] {
            assert_eq!(check_username(&name(n)), Ok(()), "name of {n}");
        }
        for n in [3, 100] {
            assert_eq!(check_password(&name(n)), Ok(()), "password of {n}");
        }
        for n in [0, 2, 51] {
            assert_eq!(
                check_username(&name(n)),
                Err(IggyError::InvalidUsername),
                "name of {n}"
            );
        }
        for n in [0, 2, 101] {
            assert_eq!(
                check_password(&name(n)),
                Err(IggyError::InvalidPassword),
                "password of {n}"
            );
        }
        assert_eq!(check_options(&WireOptions::empty()), Ok(()));
        let some = iggy_common::TopicCreateOptions {
            segment_size: Some(iggy_common::IggyByteSize::from(1u64 << 20)),
            ..iggy_common::TopicCreateOptions::default()
        }
        .to_wire()
        .expect("options");
        assert!(!some.is_empty());
        assert!(matches!(
            check_options(&some),
            Err(IggyError::UnsupportedOptionKey(_))
        ));
    }
}
