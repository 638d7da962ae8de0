//! The `Eviction` frame: a header-only, session-ending answer that Iggy's
//! server sends instead of a reply where a login cannot go on. corelog
//! sends it where Iggy's server does at the pinned commit, for logins that
//! cannot be read at all: a LOGIN_REGISTER whose protocol version is
//! outside the accepted window (`IncompatibleProtocol`, with the window),
//! one whose body has no version prefix or neither login shape
//! (`MalformedLogin`), and the legacy LOGIN_USER and
//! LOGIN_WITH_PERSONAL_ACCESS_TOKEN codes (`MalformedLogin`). The
//! connection is closed after it.

use super::header::HEADER_LEN;
use super::request::DecodeError;
use iggy_binary_protocol::consensus::EvictionHeader;
use iggy_binary_protocol::version::{IGGY_PROTOCOL_VERSION, IGGY_PROTOCOL_VERSION_MIN};
use iggy_binary_protocol::EvictionReason;

const _: () = assert!(std::mem::size_of::<EvictionHeader>() == HEADER_LEN);

/// The eviction a login that failed to decode gets.
pub fn for_login(e: &DecodeError) -> EvictionReason {
    match e {
        DecodeError::IncompatibleProtocol { .. } => EvictionReason::IncompatibleProtocol,
        _ => EvictionReason::MalformedLogin,
    }
}

/// The frame evicting `client` for `reason` (the accepted protocol window
/// filled in for `IncompatibleProtocol`, zero otherwise). One node: cluster,
/// view and replica are 0.
pub fn frame(client: u128, reason: EvictionReason) -> [u8; HEADER_LEN] {
    let header = match reason {
        EvictionReason::IncompatibleProtocol => EvictionHeader::incompatible_protocol(
            0,
            0,
            0,
            client,
            IGGY_PROTOCOL_VERSION,
            IGGY_PROTOCOL_VERSION_MIN,
        ),
        // `new` refuses (in debug builds) the reasons that need a window.
        EvictionReason::ClientReleaseTooLow | EvictionReason::ClientReleaseTooHigh => {
            EvictionHeader::new(0, 0, 0, client, EvictionReason::SessionError)
        }
        reason => EvictionHeader::new(0, 0, 0, client, reason),
    };
    let mut out = [0u8; HEADER_LEN];
    out.copy_from_slice(bytemuck::bytes_of(&header));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_binary_protocol::consensus::Command;

    #[test]
    fn frames_carry_the_reason_the_client_and_the_window_only_when_asked() {
        let f = frame(0xC0FFEE, EvictionReason::MalformedLogin);
        let h: EvictionHeader = bytemuck::checked::pod_read_unaligned(&f);
        assert_eq!(h.command, Command::Eviction);
        assert_eq!((h.size as usize, h.client), (HEADER_LEN, 0xC0FFEE));
        assert_eq!(f[HEADER_LEN - 1], EvictionReason::MalformedLogin as u8);
        assert_eq!(
            (h.server_protocol_version, h.server_protocol_version_min),
            (0, 0)
        );

        let f = frame(7, EvictionReason::IncompatibleProtocol);
        let h: EvictionHeader = bytemuck::checked::pod_read_unaligned(&f);
        assert_eq!(h.reason, EvictionReason::IncompatibleProtocol);
        assert_eq!(
            (h.server_protocol_version, h.server_protocol_version_min),
            (IGGY_PROTOCOL_VERSION, IGGY_PROTOCOL_VERSION_MIN)
        );
    }
}
