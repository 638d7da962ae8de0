//! Outgoing replica connections: from this node's replica address, with a
//! user timeout and keepalive that find a vanished peer within seconds.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// The pause before a failed peer connection is tried again.
pub(super) const RECONNECT_PAUSE: Duration = Duration::from_millis(50);
/// A connection whose sent data has gone unacknowledged this long is
/// given up (and made again): without it a connection through a partition
/// that healed waits for TCP's retransmission back-off (seconds after a
/// few seconds' cut), and the node cut off learns of its successor that
/// much later.
const PEER_SILENCE: Duration = Duration::from_millis(1000);
/// A blocked read or write on a replica connection gives up after this.
pub(super) const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `to` from address `from` (any port).
pub(super) fn connect_from(from: std::net::IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    if from.is_ipv4() == to.is_ipv4() && !from.is_unspecified() {
        socket.bind(&SocketAddr::new(from, 0).into())?;
    }
    socket.set_tcp_user_timeout(Some(PEER_SILENCE))?;
    // Keepalive counts in whole seconds: an idle peer that vanished is
    // found within about three.
    socket.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(Duration::from_secs(1))
            .with_interval(Duration::from_secs(1))
            .with_retries(2),
    )?;
    socket.connect_timeout(&to.into(), CONNECT_TIMEOUT)?;
    Ok(socket.into())
}
