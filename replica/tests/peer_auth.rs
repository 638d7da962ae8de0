//! The replica port serves only nodes that prove they hold the cluster's
//! secret: a node with another secret never joins, and a connection that
//! cannot prove itself is served nothing (no batch, no Raft message read).

mod common;

use common::*;
use corelog_replica::Secret;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ELECT: Duration = Duration::from_secs(10);

/// One frame off the stream: (kind, body); `None` once the node closed it.
fn read_frame(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len) as usize;
    let mut rest = vec![0u8; len];
    s.read_exact(&mut rest).ok()?;
    Some((rest[0], rest[5..].to_vec()))
}

fn write_frame(s: &mut TcpStream, kind: u8, group: u32, body: &[u8]) {
    let mut f = ((5 + body.len()) as u32).to_le_bytes().to_vec();
    f.push(kind);
    f.extend_from_slice(&group.to_le_bytes());
    f.extend_from_slice(body);
    // The node may already have closed the connection.
    let _ = s.write_all(&f);
}

#[test]
fn a_fetch_without_the_secret_gets_no_batch() {
    let Three {
        cluster,
        nodes,
        leader,
        ..
    } = three(&options(), ELECT);
    let li = (leader - 1) as usize;
    for k in 0..8u64 {
        pollster::block_on(nodes[li].handle().append(0, batch(k, 3), origin())).expect("append");
    }
    let addr = cluster.node(leader).expect("node").replica;

    // A client that knows the framing but not the secret: it answers the
    // challenge with a made-up proof, then asks for partition 0.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let (kind, nonce) = read_frame(&mut s).expect("a challenge");
    assert_eq!((kind, nonce.len()), (7, 16), "the node challenges first");
    let mut body = Vec::new();
    for v in [0u64, 0, u64::MAX] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&[0u8; 48]);
    write_frame(&mut s, 3, 1, &body);
    let mut kinds = Vec::new();
    while let Some((k, _)) = read_frame(&mut s) {
        kinds.push(k);
    }
    assert!(kinds.is_empty(), "frames served without a proof: {kinds:?}");

    // One that sends its request at once, without waiting for the
    // challenge (no proof at all): closed too, nothing served.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_frame(&mut s, 3, 1, &body[..24]);
    let mut kinds = Vec::new();
    while let Some((k, _)) = read_frame(&mut s) {
        kinds.push(k);
    }
    assert_eq!(kinds, vec![7], "only the challenge");
}

#[test]
fn a_node_with_another_secret_never_joins() {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let good = cluster(3);
    let mut bad = good.clone();
    bad.secret = Secret::new(b"not the cluster's secret at all, no".to_vec());
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            let c = if i == 2 { &bad } else { &good };
            Node::start(i as u64 + 1, dirs[i].path(), c, options())
        })
        .collect();
    let leader = wait_for_leader(&[&nodes[0], &nodes[1]], ELECT);
    assert_ne!(leader, 3);
    let li = (leader - 1) as usize;
    let mut want = 0;
    for k in 0..8u64 {
        let b = batch(k, 3);
        want += b.len();
        pollster::block_on(nodes[li].handle().append(0, b, origin())).expect("append");
    }
    let other = 1 - li;
    wait_stored(&nodes[other].engine(), 0, want, ELECT);
    // Five election timeouts more: node 3 has heard from nobody.
    let until = Instant::now() + options().tick * options().election_ticks as u32 * 5;
    while Instant::now() < until {
        assert_eq!(nodes[2].handle().leader(), None, "node 3 follows a leader");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        stored(&nodes[2].engine(), 0).is_empty(),
        "node 3 stored batches"
    );
}
