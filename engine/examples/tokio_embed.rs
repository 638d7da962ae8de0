//! Embedding corelog in a tokio program.
//!
//! The engine runs its own shards (one pinned thread per core, each on
//! io_uring); tokio tasks talk to it through a cloned `Handle` and simply
//! `.await` its replies. Nothing ties the futures to tokio.
//!
//! Run with `cargo run -p corelog --example tokio_embed`.

use corelog::{BatchBuilder, Config, Engine, MessageSpec, PollFrom};
use std::error::Error;

/// Builds a producer batch of `count` text messages from `producer`.
fn batch(producer: u64, round: u64, count: u64) -> Result<Vec<u8>, corelog::BuildError> {
    let texts: Vec<String> = (0..count)
        .map(|i| format!("producer {producer}, round {round}, message {i}"))
        .collect();
    let mut b = BatchBuilder::new();
    for (i, text) in texts.iter().enumerate() {
        b.push(MessageSpec {
            id: u128::from(producer) << 64 | u128::from(round) << 32 | i as u128,
            timestamp: now_micros(),
            payload: text.as_bytes(),
            user_headers: b"",
        });
    }
    b.build()
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    // Engine::open blocks briefly while the shards start and recover.
    let engine = Engine::open(Config {
        shards: Some(2),
        ..Config::new(dir.path())
    })?;
    let h = engine.handle();
    println!(
        "engine on {} with {} shards",
        dir.path().display(),
        h.shards()
    );

    // Four producer tasks, two partitions: appends to one partition are
    // stored in the order its shard receives them.
    let mut producers = Vec::new();
    for producer in 0..4u64 {
        let handle = engine.handle();
        producers.push(tokio::spawn(async move {
            let partition = producer % 2;
            for round in 0..3 {
                let ack = handle.append(partition, batch(producer, round, 2)?).await?;
                println!(
                    "producer {producer}: partition {partition}, offsets {}..{}",
                    ack.base_offset,
                    ack.base_offset + u64::from(ack.message_count)
                );
            }
            Ok::<(), Box<dyn Error + Send + Sync>>(())
        }));
    }
    for p in producers {
        p.await?.map_err(|e| e.to_string())?;
    }

    // A consumer reads each partition from the start, verifying checksums
    // on its own thread, and remembers where it stopped.
    let consumer = 1;
    for partition in h.partitions().await? {
        let reply = h.poll_verified(partition, PollFrom::First, 1 << 20).await?;
        println!(
            "partition {partition}: {} batches, {} bytes",
            reply.batch_count(),
            reply.len()
        );
        for batch in reply.batches() {
            for m in batch.messages() {
                println!(
                    "  {:>3}: {}",
                    m.offset(),
                    String::from_utf8_lossy(m.payload())
                );
            }
        }
        if !reply.is_empty() {
            h.store_offset(partition, consumer, reply.next_offset() - 1)
                .await?;
        }
        // Where the consumer continues next time: nothing new yet.
        let rest = h.poll_next(partition, consumer, 1 << 20).await?;
        println!(
            "partition {partition}: {} more batches for consumer {consumer}",
            rest.batch_count()
        );
    }

    // Shutting down joins the shard threads: do it off the async workers.
    tokio::task::spawn_blocking(move || engine.shutdown()).await??;
    Ok(())
}
