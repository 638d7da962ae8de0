//! The root user: a name and an argon2 hash of its password (the password
//! itself is not kept), from the server's configuration. Other users live in
//! the catalog ([`crate::catalog::accounts`]). Hashing and verification are slow by
//! design, so they run on the login pool ([`crate::guard::login`]), never on a
//! shard.

use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Iggy's default credentials, used when none are configured.
pub const DEFAULT_USERNAME: &str = "iggy";
/// See [`DEFAULT_USERNAME`].
pub const DEFAULT_PASSWORD: &str = "iggy";

/// Why the user cannot be set up.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UsersError {
    /// Empty name or password.
    #[error("the username and password must not be empty")]
    Empty,
    /// Hashing failed (argon2 refused its parameters or the salt).
    #[error("hashing the password: {0}")]
    Hash(argon2::password_hash::Error),
}

/// Iggy's root user, id 0: every permission, configured at start.
#[derive(Debug)]
pub struct Users {
    username: String,
    hash: String,
}

impl Users {
    /// Hashes `password` with argon2id and a random salt.
    pub fn new(username: &str, password: &str) -> Result<Users, UsersError> {
        if username.is_empty() || password.is_empty() {
            return Err(UsersError::Empty);
        }
        let hash = hash_secret(password)?;
        Ok(Users {
            username: username.to_owned(),
            hash,
        })
    }

    /// The root user's name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The argon2 hash of the root user's password.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    #[cfg(test)]
    /// Whether these are the root user's credentials (slow).
    pub fn verify(&self, username: &str, password: &str) -> bool {
        verify_hash(&self.hash, password) && username == self.username
    }
}

/// argon2id of `secret` with a fresh random salt, as a PHC string (slow).
pub fn hash_secret(secret: &str) -> Result<String, UsersError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(UsersError::Hash)
}

/// Whether `secret` matches the PHC string `hash` (slow).
pub fn verify_hash(hash: &str, secret: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    Argon2::default()
        .verify_password(secret.as_bytes(), &parsed)
        .is_ok()
}

/// A new personal access token: 48 random hex digits (192 bits).
pub fn new_token() -> String {
    let mut bytes = [0u8; 24];
    OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_pair_verifies() {
        let users = Users::new("iggy", "secret").expect("users");
        assert!(users.verify("iggy", "secret"));
        assert!(!users.verify("iggy", "Secret"));
        assert!(!users.verify("other", "secret"));
        assert!(!users.hash.contains("secret"));
    }

    #[test]
    fn tokens_are_fresh_and_hashes_verify() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 48);
        assert_ne!(a, b);
        let h = hash_secret(&a).expect("hash");
        assert!(verify_hash(&h, &a));
        assert!(!verify_hash(&h, &b));
        assert!(!verify_hash("not a hash", &a));
    }
}
