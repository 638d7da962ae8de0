//! Users and their personal access tokens, as the [`Catalog`] holds them.
//! Plain data and deterministic changes: passwords and tokens arrive here
//! already hashed (argon2, with a salt chosen by the caller), timestamps
//! arrive as arguments, so a change gives the same catalog wherever it is
//! applied.
//!
//! The root user (id 0) is not here: it comes from the server's
//! configuration (see [`crate::catalog::root`]). Stored users have ids from 1 up,
//! never reused.

use crate::catalog::model::{Catalog, TokenMeta, UserMeta};
use crate::catalog::permissions::Permissions;
use iggy_binary_protocol::WireIdentifier;

/// The root user's id.
pub const ROOT_USER_ID: u32 = 0;
/// Iggy's `UserStatus::Active`.
pub const STATUS_ACTIVE: u8 = 1;
/// Iggy's `UserStatus::Inactive`.
pub const STATUS_INACTIVE: u8 = 2;
/// Tokens a user may hold (Iggy's default `max_tokens_per_user`).
pub const MAX_TOKENS_PER_USER: usize = 100;

/// Why a user or token change is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AccountError {
    /// No such user.
    #[error("user {0} does not exist")]
    NoUser(String),
    /// The name is taken.
    #[error("a user named {0} exists")]
    UserExists(String),
    /// The root user cannot be changed this way.
    #[error("the root user cannot be deleted or changed")]
    Root,
    /// The user has a token of that name.
    #[error("user {user} has a token named {name}")]
    TokenExists {
        /// the user
        user: u32,
        /// the name
        name: String,
    },
    /// No such token.
    #[error("user {user} has no token named {name}")]
    NoToken {
        /// the user
        user: u32,
        /// the name
        name: String,
    },
    /// The user holds as many tokens as allowed.
    #[error("user {0} holds the most tokens allowed")]
    TooManyTokens(u32),
    /// Another token starts with the same characters (draw again).
    #[error("a token with this lookup key exists")]
    LookupTaken,
    /// The password changed since it was checked.
    #[error("the password changed meanwhile")]
    PasswordChanged,
    /// Ids ran out.
    #[error("no user ids left")]
    IdsExhausted,
}

/// A new user's fields.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// its name
    pub username: String,
    /// argon2 hash of its password
    pub password_hash: String,
    /// its status
    pub status: u8,
    /// its grants
    pub permissions: Option<Permissions>,
    /// its options block
    pub options: Vec<u8>,
    /// creation time
    pub created_at: u64,
}

impl Catalog {
    /// The stored user `id` names (by id or name); `None` for the root user
    /// and unknown users.
    pub fn user(&self, id: &WireIdentifier) -> Option<&UserMeta> {
        match id {
            WireIdentifier::Numeric(n) => self.user_by_id(*n),
            WireIdentifier::String(name) => self.users.iter().find(|u| u.username == name.as_str()),
        }
    }

    /// The stored user with id `id`.
    pub fn user_by_id(&self, id: u32) -> Option<&UserMeta> {
        self.users.iter().find(|u| u.id == id)
    }

    /// Adds a user; `root_name` is taken too. Returns its id.
    pub fn add_user(&mut self, new: NewUser, root_name: &str) -> Result<u32, AccountError> {
        if new.username == root_name || self.users.iter().any(|u| u.username == new.username) {
            return Err(AccountError::UserExists(new.username));
        }
        let id = self.next_user_id.max(ROOT_USER_ID + 1);
        self.next_user_id = id.checked_add(1).ok_or(AccountError::IdsExhausted)?;
        self.users.push(UserMeta {
            id,
            username: new.username,
            password_hash: new.password_hash,
            status: new.status,
            created_at: new.created_at,
            permissions: new.permissions,
            options: new.options,
            tokens: Vec::new(),
        });
        Ok(id)
    }

    fn user_mut(&mut self, id: u32) -> Result<&mut UserMeta, AccountError> {
        if id == ROOT_USER_ID {
            return Err(AccountError::Root);
        }
        self.users
            .iter_mut()
            .find(|u| u.id == id)
            .ok_or_else(|| AccountError::NoUser(id.to_string()))
    }

    /// Removes a user and its tokens.
    pub fn remove_user(&mut self, id: u32) -> Result<(), AccountError> {
        self.user_mut(id)?;
        self.users.retain(|u| u.id != id);
        Ok(())
    }

    /// Renames a user and/or sets its status.
    pub fn update_user(
        &mut self,
        id: u32,
        username: Option<String>,
        status: Option<u8>,
        root_name: &str,
    ) -> Result<(), AccountError> {
        if let Some(name) = &username {
            let taken =
                name == root_name || self.users.iter().any(|u| &u.username == name && u.id != id);
            if taken {
                return Err(AccountError::UserExists(name.clone()));
            }
        }
        let user = self.user_mut(id)?;
        if let Some(name) = username {
            user.username = name;
        }
        if let Some(status) = status {
            user.status = status;
        }
        Ok(())
    }

    /// Replaces a user's grants.
    pub fn set_permissions(
        &mut self,
        id: u32,
        permissions: Option<Permissions>,
    ) -> Result<(), AccountError> {
        self.user_mut(id)?.permissions = permissions;
        Ok(())
    }

    /// Sets a user's password hash, if its hash is still `checked` (the one
    /// the current password was verified against).
    pub fn set_password(
        &mut self,
        id: u32,
        checked: &str,
        new_hash: String,
    ) -> Result<(), AccountError> {
        let user = self.user_mut(id)?;
        if user.password_hash != checked {
            return Err(AccountError::PasswordChanged);
        }
        user.password_hash = new_hash;
        Ok(())
    }

    /// Adds a token to user `id` (the root user's tokens are stored under
    /// id 0 in [`Catalog::root_tokens`]). An expired token of the same name
    /// is replaced.
    pub fn add_token(&mut self, id: u32, token: TokenMeta, now: u64) -> Result<(), AccountError> {
        if self.all_tokens().any(|(_, t)| t.lookup == token.lookup) {
            return Err(AccountError::LookupTaken);
        }
        self.token_room(id, &token.name, now)?;
        let tokens = self.tokens_mut(id)?;
        tokens.retain(|t| !(t.name == token.name && t.expired(now)));
        tokens.push(token);
        Ok(())
    }

    /// Whether user `id` may add a token named `name` now: none of that
    /// name that has not expired, and room under [`MAX_TOKENS_PER_USER`]
    /// (an expired one of that name is replaced). Asked before the token
    /// is hashed, so a refused request costs no argon2 work.
    pub fn token_room(&self, id: u32, name: &str, now: u64) -> Result<(), AccountError> {
        let tokens = self.tokens_of(id);
        if tokens.iter().any(|t| t.name == name && !t.expired(now)) {
            return Err(AccountError::TokenExists {
                user: id,
                name: name.to_owned(),
            });
        }
        let kept = tokens
            .iter()
            .filter(|t| !(t.name == name && t.expired(now)))
            .count();
        if kept >= MAX_TOKENS_PER_USER {
            return Err(AccountError::TooManyTokens(id));
        }
        Ok(())
    }

    /// Removes user `id`'s token `name`.
    pub fn remove_token(&mut self, id: u32, name: &str) -> Result<(), AccountError> {
        let tokens = self.tokens_mut(id)?;
        let before = tokens.len();
        tokens.retain(|t| t.name != name);
        if tokens.len() == before {
            return Err(AccountError::NoToken {
                user: id,
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// User `id`'s tokens.
    pub fn tokens_of(&self, id: u32) -> &[TokenMeta] {
        if id == ROOT_USER_ID {
            return &self.root_tokens;
        }
        self.user_by_id(id).map_or(&[], |u| u.tokens.as_slice())
    }

    fn tokens_mut(&mut self, id: u32) -> Result<&mut Vec<TokenMeta>, AccountError> {
        if id == ROOT_USER_ID {
            return Ok(&mut self.root_tokens);
        }
        Ok(&mut self.user_mut(id)?.tokens)
    }

    /// Every token, with its user's id.
    pub fn all_tokens(&self) -> impl Iterator<Item = (u32, &TokenMeta)> + '_ {
        let root = self.root_tokens.iter().map(|t| (ROOT_USER_ID, t));
        root.chain(
            self.users
                .iter()
                .flat_map(|u| u.tokens.iter().map(move |t| (u.id, t))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_room_refuses_a_live_duplicate_and_a_full_set_and_add_token_agrees() {
        let mut c = Catalog::default();
        let id = c.add_user(new("u"), "iggy").expect("user");
        let token = |name: &str, lookup: &str, expiry_at| TokenMeta {
            name: name.into(),
            lookup: lookup.into(),
            hash: "h".into(),
            expiry_at,
        };
        assert_eq!(c.token_room(id, "a", 10), Ok(()));
        c.add_token(id, token("a", "la", Some(20)), 10).expect("a");
        assert!(matches!(
            c.token_room(id, "a", 10),
            Err(AccountError::TokenExists { .. })
        ));
        // Expired, a token of that name is replaced.
        assert_eq!(c.token_room(id, "a", 30), Ok(()));
        for i in 1..MAX_TOKENS_PER_USER {
            c.add_token(id, token(&format!("t{i}"), &format!("l{i}"), None), 10)
                .expect("room");
        }
        assert_eq!(
            c.token_room(id, "more", 10),
            Err(AccountError::TooManyTokens(id))
        );
        assert_eq!(
            c.add_token(id, token("more", "lmore", None), 10),
            Err(AccountError::TooManyTokens(id))
        );
        // Replacing the expired "a" needs no room.
        assert_eq!(c.token_room(id, "a", 30), Ok(()));
    }

    /// Only an expired token of the new token's own name is replaced: an
    /// expired token of another name still counts toward the limit (else
    /// a user holding expired tokens could pass `MAX_TOKENS_PER_USER`) and
    /// stays listed until it is deleted.
    #[test]
    fn an_expired_token_of_another_name_takes_room_and_stays() {
        let mut c = Catalog::default();
        let id = c.add_user(new("u"), "iggy").expect("user");
        c.add_token(id, token("old", "lold", Some(20)), 10)
            .expect("old");
        for i in 1..MAX_TOKENS_PER_USER {
            c.add_token(id, token(&format!("t{i}"), &format!("l{i}"), None), 10)
                .expect("room");
        }
        // At 30 "old" has expired; the set is still full for another name.
        assert_eq!(
            c.token_room(id, "new", 30),
            Err(AccountError::TooManyTokens(id))
        );
        assert_eq!(
            c.add_token(id, token("new", "lnew", None), 30),
            Err(AccountError::TooManyTokens(id))
        );
        // With room made, "new" goes in and the expired "old" stays.
        c.remove_token(id, "t1").expect("removed");
        c.add_token(id, token("new", "lnew", None), 30)
            .expect("room now");
        let names: Vec<&str> = c.tokens_of(id).iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"old") && names.contains(&"new"),
            "{names:?}"
        );
        assert_eq!(names.len(), MAX_TOKENS_PER_USER);
    }

    fn new(name: &str) -> NewUser {
        NewUser {
            username: name.into(),
            password_hash: "h".into(),
            status: STATUS_ACTIVE,
            permissions: None,
            options: Vec::new(),
            created_at: 1,
        }
    }

    fn token(name: &str, lookup: &str, expiry_at: Option<u64>) -> TokenMeta {
        TokenMeta {
            name: name.into(),
            lookup: lookup.into(),
            hash: "x".into(),
            expiry_at,
        }
    }

    #[test]
    fn ids_from_one_names_unique_root_untouchable() {
        let mut c = Catalog::default();
        assert_eq!(c.add_user(new("alice"), "iggy"), Ok(1));
        assert_eq!(c.add_user(new("bob"), "iggy"), Ok(2));
        assert!(matches!(
            c.add_user(new("iggy"), "iggy"),
            Err(AccountError::UserExists(_))
        ));
        assert!(matches!(
            c.update_user(2, Some("alice".into()), None, "iggy"),
            Err(AccountError::UserExists(_))
        ));
        assert_eq!(c.remove_user(ROOT_USER_ID), Err(AccountError::Root));
        c.remove_user(1).expect("removed");
        assert_eq!(c.add_user(new("carol"), "iggy"), Ok(3));
        assert!(c.user(&WireIdentifier::numeric(1)).is_none());
    }

    #[test]
    fn tokens_unique_per_user_and_by_lookup() {
        let mut c = Catalog::default();
        let id = c.add_user(new("alice"), "iggy").expect("user");
        c.add_token(id, token("t", "aaa", Some(10)), 5).expect("t");
        assert!(matches!(
            c.add_token(id, token("t", "bbb", None), 5),
            Err(AccountError::TokenExists { .. })
        ));
        assert_eq!(
            c.add_token(ROOT_USER_ID, token("r", "aaa", None), 5),
            Err(AccountError::LookupTaken)
        );
        // Expired at 10: a new token of the same name replaces it.
        c.add_token(id, token("t", "ccc", None), 10)
            .expect("replaced");
        assert_eq!(c.tokens_of(id).len(), 1);
        c.add_token(ROOT_USER_ID, token("r", "ddd", None), 10)
            .expect("root token");
        assert_eq!(c.all_tokens().count(), 2);
        c.remove_token(id, "t").expect("removed");
        assert!(c.remove_token(id, "t").is_err());
    }

    #[test]
    fn password_changes_only_from_the_checked_hash() {
        let mut c = Catalog::default();
        let id = c.add_user(new("alice"), "iggy").expect("user");
        assert_eq!(
            c.set_password(id, "other", "n".into()),
            Err(AccountError::PasswordChanged)
        );
        c.set_password(id, "h", "n".into()).expect("set");
        assert_eq!(
            c.user_by_id(id).map(|u| u.password_hash.as_str()),
            Some("n")
        );
    }
}
