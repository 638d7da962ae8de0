//! The handle from anywhere: plain threads, tokio (multi-thread and
//! current-thread), `futures`' executor, and tasks running on the shards
//! themselves; the futures need no particular runtime.
#![allow(clippy::unwrap_used)]

mod common;

use common::{base_offset_of, batch, decode_id, open, Watchdog};
use corelog::{AppendAck, Handle, LogConfig, PollFrom, PollReply, Reply, RequestError};
use std::time::Duration;

#[test]
fn the_handle_and_its_futures_cross_threads() {
    fn clone_send_sync<T: Clone + Send + Sync + 'static>() {}
    fn send_static<T: Send + 'static>(_: &T) {}
    clone_send_sync::<Handle>();
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, LogConfig::default());
    let h = engine.handle();
    let reply: Reply<AppendAck> = h.append(0, batch(0, 0));
    send_static(&reply);
    send_static(&h.poll_verified(0, PollFrom::First, 1));
    send_static(&h.partitions());
    send_static(&h.flush_all());
    send_static(&h.enforce_retention());
    // A reply made on one thread resolves on another.
    let ack = std::thread::spawn(move || reply.wait())
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(ack.base_offset, 0);
    drop(h);
    engine.shutdown().unwrap();
}

/// Appends batches `0..n` of stream `p` to partition `p` with `.await`,
/// one at a time, and reads them back.
async fn append_and_read(h: Handle, p: u64, n: u64) -> Result<(), RequestError> {
    for seq in 0..n {
        let ack = h.append(p, batch(p, seq)).await?;
        assert_eq!(ack.base_offset, base_offset_of(seq), "partition {p}");
    }
    let reply: PollReply = h.poll_verified(p, PollFrom::First, 1 << 20).await?;
    let seqs: Vec<u64> = reply
        .batches()
        .map(|b| decode_id(b.messages().next().unwrap().id()).1)
        .collect();
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "partition {p}");
    Ok(())
}

#[test]
fn tokio_tasks_on_a_multi_thread_runtime() {
    let _watchdog = Watchdog::arm("tokio multi-thread", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let h = engine.handle();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .build()
        .unwrap();
    rt.block_on(async move {
        let tasks: Vec<_> = (0..8)
            .map(|p| tokio::spawn(append_and_read(h.clone(), p, 20)))
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(h.partitions().await.unwrap(), (0..8).collect::<Vec<_>>());
        h.flush_all().await.unwrap();
    });
    drop(rt);
    engine.shutdown().unwrap();
}

#[test]
fn tokio_current_thread_and_the_futures_executor() {
    let _watchdog = Watchdog::arm("single-threaded executors", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // Several requests in flight at once on one thread.
    rt.block_on(async {
        let (a, b, c) = tokio::join!(
            append_and_read(engine.handle(), 1, 10),
            append_and_read(engine.handle(), 2, 10),
            append_and_read(engine.handle(), 3, 10),
        );
        a.and(b).and(c).unwrap();
    });
    futures::executor::block_on(append_and_read(engine.handle(), 4, 10)).unwrap();
    engine.shutdown().unwrap();
}

#[test]
fn tasks_on_the_shards_use_the_same_handle() {
    let _watchdog = Watchdog::arm("tasks on shards", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    let (tx, rx) = std::sync::mpsc::channel();
    for shard in 0..2 {
        let (h, tx) = (engine.handle(), tx.clone());
        engine
            .handle()
            .spawn_on(shard, move || async move {
                // Blocking would stall the shard: refused.
                let blocked = h.stats(0).wait();
                // Its own partition (no queue) and the other shard's.
                let own = append_and_read(h.clone(), 10 + shard as u64, 5).await;
                let other = append_and_read(h.clone(), 21 - shard as u64, 5).await;
                tx.send((
                    shard,
                    blocked.map(drop),
                    own,
                    other,
                    h.shard_of(10 + shard as u64),
                ))
                .unwrap();
            })
            .wait()
            .unwrap();
    }
    drop(tx);
    let mut results: Vec<_> = rx.iter().collect();
    results.sort_by_key(|r| r.0);
    assert_eq!(results.len(), 2);
    for (shard, blocked, own, other, placed) in results {
        assert!(
            matches!(blocked, Err(RequestError::WouldBlockShard)),
            "shard {shard}: {blocked:?}"
        );
        own.unwrap();
        other.unwrap();
        assert_eq!(
            placed,
            shard,
            "partition {} is shard {shard}'s own",
            10 + shard
        );
    }
    let mut parts = futures::executor::block_on(engine.handle().partitions()).unwrap();
    parts.sort_unstable();
    assert_eq!(parts, vec![10, 11, 20, 21]);
    engine.shutdown().unwrap();
}

/// A future that is ready at once and panics when dropped.
struct PanicsWhenDropped;

impl std::future::Future for PanicsWhenDropped {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Ready(())
    }
}

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("deliberate panic dropping a task on a shard (this test expects it)");
    }
}

/// Regression: a panic in a task started with spawn_on unwound the shard
/// thread; every request it had taken and every later one to that shard
/// then waited forever (nothing answered or closed its queue).
#[test]
fn a_panicking_task_on_a_shard_ends_alone() {
    let _watchdog = Watchdog::arm("panicking shard task", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let engine = open(
        dir.path(),
        2,
        LogConfig {
            fsync: corelog::FsyncPolicy::Batch,
            ..LogConfig::default()
        },
    );
    let mut seq = 0;
    let mut replies = Vec::new();
    for how in 0..3 {
        // Appends to shard 0 in flight around the panic.
        for _ in 0..50 {
            replies.push((seq, engine.handle().append(0, batch(0, seq))));
            seq += 1;
        }
        let h = engine.handle();
        match how {
            0 => engine.handle().spawn_on(0, || -> std::future::Ready<()> {
                panic!("deliberate panic starting a task on a shard (this test expects it)")
            }),
            1 => engine.handle().spawn_on(0, move || async move {
                h.append(0, batch(1, 0)).await.unwrap();
                panic!("deliberate panic in a task on a shard (this test expects it)");
            }),
            _ => engine.handle().spawn_on(0, || PanicsWhenDropped),
        }
        .wait()
        .unwrap();
        for _ in 0..50 {
            replies.push((seq, engine.handle().append(0, batch(0, seq))));
            seq += 1;
        }
    }
    for (seq, r) in replies {
        r.wait()
            .unwrap_or_else(|e| panic!("append {seq} around the panics: {e}"));
    }
    // The shard still serves its partition.
    let stats = engine.handle().stats(0).wait().unwrap();
    assert_eq!(stats.appends, seq + 1, "every append, and the task's one");
    engine.handle().spawn_on(0, || async {}).wait().unwrap();
    engine.shutdown().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    assert_eq!(
        engine.handle().stats(0).wait().unwrap().next_offset,
        stats.next_offset
    );
    engine.shutdown().unwrap();
}
