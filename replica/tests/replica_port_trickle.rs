//! The replica port under a stranger that fills it (issue 30, finding 3):
//! connections from an address that is no node's, each declaring a large
//! first frame or trickling a small one a byte at a time, never hold the
//! port. They are closed by the handshake deadline (or at once, for a
//! first frame larger than a handshake's), they take only the strangers'
//! few slots, and a follower restarted meanwhile reconnects and catches up.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const ELECT: Duration = Duration::from_secs(10);
/// Connections opened to each of two nodes (more than the port's 64 slots).
const TRICKLERS: usize = 80;
/// No node is here.
const STRANGER: &str = "127.0.0.77";

/// A connection from [`STRANGER`] to `to` that read the challenge (when
/// it was given one) and declared a first frame of `len` bytes.
fn stranger(to: SocketAddr, len: u32) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let from: SocketAddr = format!("{STRANGER}:0").parse().expect("addr");
    socket.bind(&from.into()).ok()?;
    socket
        .connect_timeout(&to.into(), Duration::from_secs(1))
        .ok()?;
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    let mut challenge = [0u8; 4 + 5 + 16];
    let _ = s.read_exact(&mut challenge);
    let _ = s.write_all(&len.to_le_bytes());
    Some(s)
}

/// Whether the node closed `s`: a read ends (EOF or reset) or a write fails.
fn closed(s: &mut TcpStream) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_millis(5)));
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        _ => s.write_all(&[0]).is_err(),
    }
}

#[test]
fn trickling_strangers_never_hold_the_replica_port() {
    let opts = options();
    let Three {
        dirs,
        cluster,
        mut nodes,
        leader,
    } = three(&opts, ELECT);
    let li = (leader - 1) as usize;
    let fi = (li + 1) % 3;
    let targets = [
        cluster.node(leader).expect("leader").replica,
        cluster.node(fi as u64 + 1).expect("follower").replica,
    ];
    // Half declare an 80 MiB frame, half a 100-byte one they trickle.
    let mut held = Vec::new();
    for to in targets {
        for i in 0..TRICKLERS {
            let len = if i % 2 == 0 { 80 << 20 } else { 100 };
            if let Some(s) = stranger(to, len) {
                held.push(s);
            }
        }
    }
    assert!(
        held.len() >= TRICKLERS,
        "strangers connected: {}",
        held.len()
    );

    // Meanwhile a follower restarts: its peers' connections to it and its
    // own must find room.
    nodes[fi].stop();
    nodes[fi] = Node::start(fi as u64 + 1, dirs[fi].path(), &cluster, opts.clone());
    let mut want = 0;
    for k in 0..20u64 {
        let b = batch(k, 3);
        want += b.len();
        pollster::block_on(nodes[li].handle().append(0, b, origin())).expect("append");
    }

    // Each trickles a byte every 250 ms until closed, for at most 5 s.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) && !held.is_empty() {
        held.retain_mut(|s| !closed(s));
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        held.is_empty(),
        "{} strangers' connections still open after 5 s (the handshake deadline is 2 s)",
        held.len()
    );
    wait_stored(&nodes[fi].engine(), 0, want, Duration::from_secs(15));
    assert_eq!(
        stored(&nodes[fi].engine(), 0),
        stored(&nodes[li].engine(), 0),
        "the restarted follower caught up byte for byte"
    );
}
