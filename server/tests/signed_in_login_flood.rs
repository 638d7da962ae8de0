//! A login flood with the right password (issue 30, finding 4): an account,
//! any account, signing in again and again on many connections from one
//! address (each LOGIN a full argon2 check, never throttled since none
//! fails) kept the login pool to itself, so a sign-in from another address
//! waited behind the whole flood. Every hash now shares one budget served
//! round robin by address (`guard/login/fair.rs`): the other address's
//! sign-in waits for a few of the flood's hashes, not for all of them.

mod common;

use common::raw::Raw;
use common::{client, start_with};
use corelog_server::Limits;
use iggy::prelude::*;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const FLOOD: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_right_password_flood_from_one_address_does_not_hold_another_addresss_sign_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            login_concurrency: 1,
            ..Limits::default()
        },
    );
    let root = client(&server).await;
    root.create_user("flooder", "secret1", UserStatus::Active, None)
        .await
        .expect("user");
    let addr = server.local_addr();
    let flood_ip: IpAddr = "127.0.0.2".parse().expect("ip");
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<_> = (0..FLOOD)
        .map(|_| {
            let (done, stop) = (done.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = Raw::connect_from(flood_ip, addr);
                while !stop.load(Ordering::SeqCst) {
                    // Signed in after the first: every LOGIN is checked again.
                    assert_eq!(c.login("flooder", "secret1"), 0);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    // The flood is under way: every flooder has a sign-in queued.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while done.load(Ordering::SeqCst) < 2 * FLOOD as u64 {
        let dead = flooders.iter().filter(|f| f.is_finished()).count();
        assert!(
            dead == 0 && std::time::Instant::now() < deadline,
            "the flood stalled at {} sign-ins, {dead} flooders ended",
            done.load(Ordering::SeqCst)
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut most = 0;
    for _ in 0..3 {
        let before = done.load(Ordering::SeqCst);
        let mut victim = Raw::connect_from("127.0.0.3".parse().expect("ip"), addr);
        assert_eq!(victim.login("iggy", "iggy"), 0);
        let waited_for = done.load(Ordering::SeqCst) - before;
        most = most.max(waited_for);
    }
    stop.store(true, Ordering::SeqCst);
    for f in flooders {
        f.join().expect("flooder");
    }
    // Round robin: at most a hash or two of the flood's before the other
    // address's (first in first out: the whole queue, about FLOOD).
    assert!(
        most <= 8,
        "a sign-in from another address waited for {most} of the flood's {FLOOD} queued sign-ins"
    );
    assert_eq!(server.counters().hashes_busy, 0, "nothing refused");
}
