//! Logins that cannot be read are answered as Iggy's server answers them:
//! a header-only `Eviction` frame, then the connection closes. A version
//! outside the accepted window names the window; a body without a version
//! prefix, and the legacy LOGIN_USER and LOGIN_WITH_PERSONAL_ACCESS_TOKEN
//! codes, are `MalformedLogin`. A good login on another connection is
//! served as before.

mod common;

use common::raw::Raw;
use common::start;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::{
    GET_STREAMS_CODE, LOGIN_REGISTER_CODE, LOGIN_USER_CODE, LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE,
};
use iggy_binary_protocol::requests::users::LoginRegisterRequest;
use iggy_binary_protocol::version::{IGGY_PROTOCOL_VERSION, IGGY_PROTOCOL_VERSION_MIN};
use iggy_binary_protocol::{ClientVersionInfo, EvictionReason, WireName};

fn login_body(protocol_version: u32) -> Vec<u8> {
    LoginRegisterRequest {
        version_info: ClientVersionInfo {
            protocol_version,
            sdk_name: WireName::new("raw").expect("name"),
            sdk_version: WireName::new("0").expect("name"),
        },
        username: WireName::new("iggy").expect("name"),
        password: "iggy".to_owned().into(),
        client_context: None,
    }
    .to_bytes()
    .to_vec()
}

#[test]
fn a_login_outside_the_protocol_window_is_evicted_with_the_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    for version in [
        0,
        IGGY_PROTOCOL_VERSION_MIN - 1,
        IGGY_PROTOCOL_VERSION + (1 << 20),
    ] {
        let mut raw = Raw::connect(server.local_addr());
        let (reason, window) = raw.send_evicted(LOGIN_REGISTER_CODE, &login_body(version));
        assert_eq!(
            reason,
            EvictionReason::IncompatibleProtocol as u8,
            "{version:#x}"
        );
        assert_eq!(window, (IGGY_PROTOCOL_VERSION, IGGY_PROTOCOL_VERSION_MIN));
        assert!(raw.closed_by_server(), "the connection ends");
    }
    // The right version, right credentials: a reply, signed in.
    let mut raw = Raw::connect(server.local_addr());
    assert_eq!(raw.login("iggy", "iggy"), 0);
    assert_eq!(raw.send(GET_STREAMS_CODE, &[]).status, 0);
}

#[test]
fn a_login_without_a_version_prefix_is_evicted_as_malformed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let mut prefix_only = login_body(IGGY_PROTOCOL_VERSION);
    prefix_only.truncate(prefix_only.len() - 3);
    for body in [Vec::new(), vec![1, 2], prefix_only] {
        let mut raw = Raw::connect(server.local_addr());
        let (reason, window) = raw.send_evicted(LOGIN_REGISTER_CODE, &body);
        assert_eq!(reason, EvictionReason::MalformedLogin as u8, "{body:?}");
        assert_eq!(window, (0, 0), "no window outside IncompatibleProtocol");
        assert!(raw.closed_by_server());
    }
}

#[test]
fn legacy_login_codes_are_evicted_signed_in_or_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    for code in [LOGIN_USER_CODE, LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE] {
        let mut raw = Raw::connect(server.local_addr());
        let (reason, _) = raw.send_evicted(code, &[]);
        assert_eq!(reason, EvictionReason::MalformedLogin as u8, "code {code}");
        assert!(raw.closed_by_server());

        let mut raw = Raw::connect(server.local_addr());
        assert_eq!(raw.login("iggy", "iggy"), 0);
        let (reason, _) = raw.send_evicted(code, b"anything");
        assert_eq!(reason, EvictionReason::MalformedLogin as u8, "code {code}");
        assert!(raw.closed_by_server());
    }
}
