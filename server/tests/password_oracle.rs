//! CHANGE_PASSWORD as a password oracle (issue 30, finding 4): its check of
//! the current password is a sign-in's, throttled per peer address and
//! counted toward the connection's `max_failed_logins`; and a token that
//! cannot be added is refused before any hashing.

mod common;

use common::{client, connect, named, start_with};
use corelog_server::CloseReason;
use corelog_server::Limits;
use iggy::prelude::*;
use std::time::{Duration, Instant};

const INVALID_CREDENTIALS: u32 = 42;

async fn with_user(server: &corelog_server::Server) -> IggyClient {
    let root = client(server).await;
    root.create_user("guesser", "secret1", UserStatus::Active, None)
        .await
        .expect("user");
    let c = connect(server).await;
    c.login_user("guesser", "secret1").await.expect("sign in");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_current_passwords_are_throttled_per_address_like_sign_ins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            login_failure_burst: 2,
            login_failure_rate: 0.001,
            max_failed_logins: 100,
            ..Limits::default()
        },
    );
    let c = with_user(&server).await;
    let me = named("guesser");
    for guess in ["guess-1", "guess-2"] {
        let r = c.change_password(&me, guess, "changed1").await;
        assert_eq!(r.map_err(|e| e.as_code()), Err(INVALID_CREDENTIALS));
    }
    // The burst is spent: even the right password is not checked now.
    let r = c.change_password(&me, "secret1", "changed1").await;
    assert_eq!(r.map_err(|e| e.as_code()), Err(INVALID_CREDENTIALS));
    let counters = server.counters();
    assert_eq!(counters.logins_failed, 2, "two wrong guesses checked");
    assert!(counters.logins_throttled >= 1, "the third was throttled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_current_passwords_close_the_connection_at_max_failed_logins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_failed_logins: 2,
            ..Limits::default()
        },
    );
    let c = with_user(&server).await;
    let me = named("guesser");
    for guess in ["guess-1", "guess-2"] {
        let _ = c.change_password(&me, guess, "changed1").await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.counters().closed_for(CloseReason::LoginFailures) == 0 && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        server.counters().closed_for(CloseReason::LoginFailures),
        1,
        "the connection guessing is closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_cannot_be_added_is_refused_and_the_others_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(dir.path(), Limits::default());
    let c = with_user(&server).await;
    c.create_personal_access_token("first", IggyExpiry::NeverExpire)
        .await
        .expect("token");
    let again = c
        .create_personal_access_token("first", IggyExpiry::NeverExpire)
        .await;
    assert!(again.is_err(), "a duplicate name is refused");
    let tokens = c.get_personal_access_tokens().await.expect("tokens");
    assert_eq!(tokens.len(), 1);
}
