//! A broker-shaped embedding: two partitions, a producer per partition that
//! keeps its batches in order through back-pressure, a consumer stream per
//! partition that waits for data instead of polling in a loop, the
//! engine's metrics, and a clean shutdown. It checks what it consumed
//! against what it produced and exits non-zero on any difference (CI runs
//! it).
//!
//! Run with `cargo run -p corelog --example broker`.

use corelog::{BatchBuilder, Config, Engine, MessageSpec};
use futures::StreamExt;
use std::error::Error;
use std::time::Duration;

const PARTITIONS: u64 = 2;
const BATCHES: u64 = 200;
const MESSAGES: u64 = 10;

fn batch(partition: u64, seq: u64) -> Result<Vec<u8>, corelog::BuildError> {
    let texts: Vec<String> = (0..MESSAGES)
        .map(|i| format!("partition {partition}, batch {seq}, message {i}"))
        .collect();
    let mut b = BatchBuilder::new();
    for (i, text) in texts.iter().enumerate() {
        b.push(MessageSpec {
            id: u128::from(seq * MESSAGES + i as u64),
            timestamp: 1_700_000_000_000_000 + seq,
            payload: text.as_bytes(),
            user_headers: b"",
        });
    }
    b.build()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::open(Config {
        shards: Some(2),
        // Leave the cores to tokio as well: the shards are not pinned.
        pin_threads: false,
        ..Config::new(dir.path())
    })?;
    let h = engine.handle();

    for p in 0..PARTITIONS {
        h.create_partition(p).await?;
    }

    // A consumer per partition, from offset 0: each reply holds what
    // landed since the one before; the stream waits on the shard between.
    let mut consumers = Vec::new();
    for p in 0..PARTITIONS {
        let mut stream = h
            .consume(p, 0, 64 << 10)
            .max_wait(Duration::from_millis(500));
        consumers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            while ids.len() < (BATCHES * MESSAGES) as usize {
                match stream.next().await {
                    Some(Ok(reply)) => ids.extend(reply.messages().map(|m| (m.offset(), m.id()))),
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
            Ok(ids)
        }));
    }

    // A producer per partition: `send` waits while the shard's queue is
    // full, so its batches are stored in the order sent, with many in
    // flight.
    let mut producers = Vec::new();
    for p in 0..PARTITIONS {
        let mut producer = h.producer(p);
        producers.push(tokio::spawn(async move {
            let mut acks = Vec::new();
            for seq in 0..BATCHES {
                let bytes = batch(p, seq).map_err(|e| e.to_string())?;
                acks.push(producer.send(bytes).await);
            }
            let mut offsets = Vec::new();
            for ack in acks {
                offsets.push(ack.await.map_err(|e| e.to_string())?.base_offset);
            }
            Ok::<_, String>(offsets)
        }));
    }
    for (p, task) in producers.into_iter().enumerate() {
        let offsets = task.await??;
        let expected: Vec<u64> = (0..BATCHES).map(|s| s * MESSAGES).collect();
        if offsets != expected {
            return Err(format!("partition {p}: stored out of order: {offsets:?}").into());
        }
    }
    for (p, task) in consumers.into_iter().enumerate() {
        let ids = task.await??;
        let expected: Vec<(u64, u128)> = (0..BATCHES * MESSAGES)
            .map(|i| (i, u128::from(i)))
            .collect();
        if ids != expected {
            return Err(format!(
                "partition {p}: consumed {} messages, not the {} produced in order",
                ids.len(),
                expected.len()
            )
            .into());
        }
        println!(
            "partition {p}: {} messages produced and consumed in order",
            ids.len()
        );
    }

    let m = h.metrics();
    for s in &m.shards {
        println!(
            "shard {}: {} appends, {} bytes, {} polls, {} bytes served, {} queued, append p99 <= {:?}",
            s.health.shard,
            s.appends,
            s.appended_bytes,
            s.polls,
            s.polled_bytes,
            s.health.queued,
            s.append_latency.quantile_at_most(0.99),
        );
    }
    if m.appends() != PARTITIONS * BATCHES {
        return Err(format!("metrics count {} appends", m.appends()).into());
    }
    engine.shutdown_timeout(Duration::from_secs(30))?;
    println!("shut down cleanly");
    Ok(())
}
