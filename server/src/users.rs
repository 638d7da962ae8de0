//! The server's user: a name and an argon2 hash of its password (the
//! password itself is not kept). Verification is slow by design, so it runs
//! on the login pool ([`crate::login`]), never on a shard.

use argon2::password_hash::rand_core::OsRng;
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
    /// Hashing failed.
    #[error("hashing the password: {0}")]
    Hash(String),
}

/// The one user this server knows (Iggy's root user, id 0).
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
        let salt = SaltString::generate(&mut OsRng);
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| UsersError::Hash(e.to_string()))?
            .to_string();
        Ok(Users {
            username: username.to_owned(),
            hash,
        })
    }

    /// Whether these are the user's credentials.
    pub fn verify(&self, username: &str, password: &str) -> bool {
        let Ok(hash) = PasswordHash::new(&self.hash) else {
            return false;
        };
        let password_ok = Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok();
        password_ok && username == self.username
    }
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
}
