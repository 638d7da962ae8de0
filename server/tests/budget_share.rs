//! The in-flight budget after sign-in (issue 30, finding 2): a signed-in
//! client declaring requests of the largest size, sending all but their
//! last bytes and trickling those, held the whole `--max-inflight-bytes`
//! until its requests' deadlines, and every request with a payload waited,
//! sign-ins from other hosts included. One address's connections now hold
//! at most half the budget together (`guard/budget.rs`).

mod common;

use common::raw::Raw;
use common::start_with;
use corelog_server::Limits;
use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

const MIB: u64 = 1 << 20;

#[test]
fn trickled_large_requests_from_one_address_leave_room_for_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_with(
        dir.path(),
        Limits {
            max_request_bytes: Some(5 * MIB),
            max_inflight_bytes: 8 * MIB,
            stall_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            ..Limits::default()
        },
    );
    let addr = server.local_addr();
    let attacker: IpAddr = "127.0.0.2".parse().expect("ip");
    // Two requests with payloads of 4 MiB, all but their last byte sent:
    // 8 MiB, the whole budget, if one address may hold it.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut c = Raw::connect_from(attacker, addr);
        assert_eq!(c.login("iggy", "iggy"), 0);
        let len = (4 * MIB) as usize;
        let header = c.header(iggy_binary_protocol::codes::SEND_MESSAGES_CODE, len);
        c.stream.write_all(&header).expect("header");
        let body = vec![0u8; len - 1];
        // Written from a thread: the server stops reading when it has no
        // room, and the write then waits.
        let mut stream = c.stream.try_clone().expect("clone");
        holders.push((
            c,
            std::thread::spawn(move || {
                let _ = stream.write_all(&body);
            }),
        ));
    }
    std::thread::sleep(Duration::from_millis(500));
    // Another host signs in (a request with a payload, so it needs room).
    let mut other = Raw::connect_from("127.0.0.3".parse().expect("ip"), addr);
    other
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert_eq!(
        other.login("iggy", "iggy"),
        0,
        "signed in while the other address holds its requests"
    );
    // ...while the first address still holds its share.
    assert!(
        server.inflight_bytes() >= 4 * MIB,
        "the holders hold {} bytes",
        server.inflight_bytes()
    );
    drop(holders);
}
