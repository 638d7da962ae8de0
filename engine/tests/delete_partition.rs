//! `Handle::delete_partition`: the partition's data is gone, now and after
//! a reopen, and other partitions are untouched.

use corelog::{BatchBuilder, Config, Engine, MessageSpec, PollFrom, RequestError};

fn batch(payload: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push(MessageSpec {
        id: 1,
        timestamp: 1,
        payload,
        user_headers: b"",
    });
    b.build().expect("batch")
}

#[test]
fn deleted_partition_is_gone_now_and_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = || Config {
        shards: Some(2),
        ..Config::new(dir.path())
    };
    let engine = Engine::open(config()).expect("open");
    for p in [3u64, 4] {
        engine
            .handle()
            .append(p, batch(b"kept or not"))
            .wait()
            .expect("append");
    }
    engine.handle().delete_partition(3).wait().expect("delete");
    assert!(!dir.path().join("partitions/3").exists());
    assert!(matches!(
        engine.handle().poll(3, PollFrom::First, 1 << 20).wait(),
        Err(RequestError::UnknownPartition { partition: 3 })
    ));
    // Deleting again, or a partition that never existed, succeeds.
    engine
        .handle()
        .delete_partition(3)
        .wait()
        .expect("delete again");
    engine
        .handle()
        .delete_partition(99)
        .wait()
        .expect("delete unknown");
    engine.shutdown().expect("shutdown");

    let engine = Engine::open(config()).expect("reopen");
    let partitions = engine.handle().partitions();
    assert_eq!(pollster_block(partitions).expect("list"), vec![4]);
    let reply = engine
        .handle()
        .poll(4, PollFrom::First, 1 << 20)
        .wait()
        .expect("poll");
    assert_eq!(reply.batch_count(), 1);
    engine.shutdown().expect("shutdown");
}

fn pollster_block<T>(f: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(f)
}
