//! Many threads appending to many partitions at once, across shards.
#![allow(clippy::unwrap_used)]

use corelog::{BatchBuilder, Config, Engine, MessageSpec, PollFrom};
use std::collections::HashMap;

fn batch(writer: u64, seq: u64, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("w{writer}-s{seq}-m{i}").into_bytes())
        .collect();
    for (i, p) in payloads.iter().enumerate() {
        b.push(MessageSpec {
            id: (u128::from(writer) << 64) | (u128::from(seq) << 16) | i as u128,
            timestamp: 1_000 + seq,
            payload: p,
            user_headers: b"",
        });
    }
    b.build().unwrap()
}

#[test]
fn many_threads_many_partitions_offsets_continuous_no_loss_no_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Config {
        shards: Some(2),
        ..Config::new(dir.path())
    })
    .unwrap();
    let partitions = 6u64;
    let threads = 4u64;
    let per_thread = 200u64;
    std::thread::scope(|s| {
        for w in 0..threads {
            let h = engine.handle();
            s.spawn(move || {
                let mut pending = Vec::new();
                for seq in 0..per_thread {
                    let p = (w + seq) % partitions;
                    pending.push(h.append(p, batch(w, seq, 1 + (seq % 3) as usize)));
                    if pending.len() == 16 {
                        for r in pending.drain(..) {
                            r.wait().unwrap();
                        }
                    }
                }
                for r in pending {
                    r.wait().unwrap();
                }
            });
        }
    });
    let mut seen: HashMap<u128, u64> = HashMap::new();
    let mut total = 0u64;
    for p in 0..partitions {
        let mut next = 0u64;
        loop {
            let reply = engine
                .handle()
                .poll(p, PollFrom::Offset(next), 1 << 20)
                .wait()
                .unwrap();
            if reply.is_empty() {
                break;
            }
            reply.verify(&engine.handle().limits()).unwrap();
            for b in reply.batches() {
                assert_eq!(b.base_offset(), next, "partition {p}: offsets continuous");
                assert_eq!(b.partition_id(), p);
                for m in b.messages() {
                    assert!(
                        seen.insert(m.id(), p).is_none(),
                        "message {:x} stored twice",
                        m.id()
                    );
                    total += 1;
                }
                next = b.next_offset();
            }
        }
        let stats = engine.handle().stats(p).wait().unwrap();
        assert_eq!(stats.next_offset, next);
    }
    let expected: u64 = (0..threads)
        .map(|_| (0..per_thread).map(|seq| 1 + seq % 3).sum::<u64>())
        .sum();
    assert_eq!(total, expected, "no message lost");
    engine.shutdown().unwrap();
}
