//! Embedding corelog in a plain multi-threaded program (no async runtime).
//!
//! Every request returns a `Reply` future; `Reply::wait` blocks the calling
//! thread until the owning shard answers. Writers keep a few appends in
//! flight before waiting, which is how a thread gets throughput without
//! an executor.
//!
//! Run with `cargo run -p corelog --example threads_embed`.

use corelog::{BatchBuilder, Config, Engine, FsyncPolicy, LogConfig, MessageSpec, PollFrom};
use std::collections::VecDeque;

const PARTITIONS: u64 = 3;
const WRITERS: u64 = 4;
const BATCHES_PER_WRITER: u64 = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::open(Config {
        shards: Some(2),
        log: LogConfig {
            // Acknowledge only what an fdatasync made durable.
            fsync: FsyncPolicy::Batch,
            ..LogConfig::default()
        },
        ..Config::new(dir.path())
    })?;
    let h = engine.handle();

    std::thread::scope(|s| -> Result<(), corelog::Error> {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let handle = engine.handle();
                s.spawn(move || -> Result<u64, corelog::Error> {
                    let mut in_flight = VecDeque::new();
                    let mut messages = 0;
                    for seq in 0..BATCHES_PER_WRITER {
                        let text = format!("writer {writer} says hello #{seq}");
                        let mut b = BatchBuilder::new();
                        b.push(MessageSpec {
                            id: u128::from(writer) << 64 | u128::from(seq),
                            timestamp: 1_700_000_000_000_000 + seq,
                            payload: text.as_bytes(),
                            user_headers: b"lang=en",
                        });
                        let bytes = b.build().expect("one message is a valid batch");
                        in_flight.push_back(handle.append(seq % PARTITIONS, bytes));
                        if in_flight.len() == 8 {
                            if let Some(reply) = in_flight.pop_front() {
                                messages += u64::from(reply.wait()?.message_count);
                            }
                        }
                    }
                    for reply in in_flight {
                        messages += u64::from(reply.wait()?.message_count);
                    }
                    Ok(messages)
                })
            })
            .collect();
        for (writer, w) in writers.into_iter().enumerate() {
            let messages = w.join().expect("writer thread")?;
            println!("writer {writer}: {messages} messages acknowledged (durable)");
        }
        Ok(())
    })?;

    for partition in 0..PARTITIONS {
        let stats = h.stats(partition).wait()?;
        // Read the partition in pages of at most 4 KiB (whole batches).
        let (mut next, mut batches) = (0, 0);
        let mut last = String::new();
        loop {
            let reply = h.poll(partition, PollFrom::Offset(next), 4096).wait()?;
            if reply.is_empty() {
                break;
            }
            for batch in reply.batches() {
                batches += 1;
                if let Some(m) = batch.messages().last() {
                    last = String::from_utf8_lossy(m.payload()).into_owned();
                }
            }
            next = reply.next_offset();
        }
        println!(
            "partition {partition}: {batches} batches, offsets 0..{}, {} bytes, {} fdatasyncs; last message: {last:?}",
            stats.next_offset, stats.bytes, stats.syncs
        );
    }
    engine.shutdown()?;
    Ok(())
}
