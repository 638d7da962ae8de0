//! The forwarding writer against a leader served by [`serve`] over
//! loopback: one connection for many requests, and forwarding again once
//! a leader that could not be reached can be.

use super::*;
use std::net::TcpListener;
use std::sync::atomic::AtomicUsize;

/// A leader that answers every offset command with 42.
#[derive(Debug)]
struct Answers;

impl Proposer for Answers {
    fn append(&self, _: u64, _: Bytes, _: Origin) -> Reply<AppendAck> {
        Box::pin(async { Ok(AppendAck::default()) })
    }

    fn offset_cmd(&self, _: Command) -> Reply<u64> {
        Box::pin(async { Ok(42) })
    }
}

/// Serves forward connections on `l` as the leader does; counts them.
fn leader(l: TcpListener, key: super::super::auth::Key) -> Arc<AtomicUsize> {
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let key = key.clone();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                if super::super::auth::accept(&mut s, &key, deadline).is_ok() {
                    let _ = serve(s, 2, &Answers, &AtomicBool::new(false));
                }
            });
        }
    });
    accepted
}

/// Forwards one offset command to node 1; its answer.
fn forward_one(f: &Forwarder) -> Result<u64, ReplicaError> {
    let (tx, rx) = oneshot::channel();
    f.forward(
        1,
        Job {
            request: Request::Offset(Command::DeleteOffset {
                partition: 3,
                consumer: 4,
            }),
            answer: Answer::Count(tx),
        },
    );
    crate::block_on::block_on(rx).unwrap_or(Err(ReplicaError::Stopped))
}

fn forwarder(addr: SocketAddr, key: &super::super::auth::Key) -> (Forwarder, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let local = IpAddr::from([127, 0, 0, 1]);
    let (f, _threads) = Forwarder::start(&[(1, addr)], 2, local, key, &stop).expect("start");
    (f, stop)
}

/// Requests forwarded one after another share one connection: the
/// writer keeps a live one instead of connecting anew for each.
#[test]
fn requests_share_one_connection() {
    let key = super::super::auth::Key::of(None);
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let accepted = leader(l, key.clone());
    let (f, stop) = forwarder(addr, &key);
    for _ in 0..5 {
        assert!(matches!(forward_one(&f), Ok(42)));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "connections opened");
    stop.store(true, Ordering::Relaxed);
}

/// A leader that could not be reached is tried again once the pause
/// after the failed connect is over: forwarding resumes (a follower
/// whose leader was down once must not refuse its sends for good).
#[test]
fn forwarding_resumes_once_the_leader_can_be_reached() {
    let key = super::super::auth::Key::of(None);
    // (Another test may take the port between its two binds: try again.)
    for _ in 0..5 {
        // A port nobody listens on, for now.
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let (f, stop) = forwarder(addr, &key);
        assert!(
            matches!(
                forward_one(&f),
                Err(ReplicaError::NotLeader { leader: Some(1) })
            ),
            "nobody listens yet"
        );
        let Ok(l) = TcpListener::bind(addr) else {
            stop.store(true, Ordering::Relaxed);
            continue;
        };
        let accepted = leader(l, key.clone());
        std::thread::sleep(super::super::socket::RECONNECT_PAUSE * 2);
        assert!(matches!(forward_one(&f), Ok(42)), "forwarding resumed");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        stop.store(true, Ordering::Relaxed);
        return;
    }
    panic!("the port was taken five times");
}
