//! Segment preallocation follows the durability policy: with `fsync=never`
//! a segment file holds only what was written (ext4's delayed allocation
//! maps blocks at write-back, off the send path); with `fsync=batch` it is
//! preallocated a step ahead of the writes.

mod common;

use common::{client, message, named, stream_and_topic};
use corelog::FsyncPolicy;
use corelog_server::{Server, ServerConfig};
use iggy::prelude::*;
use std::path::Path;

fn start(dir: &Path, fsync: FsyncPolicy) -> Server {
    Server::start(ServerConfig {
        shards: Some(2),
        pin_threads: false,
        fsync,
        ..ServerConfig::new(dir, "127.0.0.1:0".parse().expect("address"))
    })
    .expect("server starts")
}

/// The bytes in the partition's segment files, and the files' sizes.
fn segment_sizes(dir: &Path) -> u64 {
    let mut size = 0;
    for p in std::fs::read_dir(dir.join("partitions")).expect("partitions") {
        for f in std::fs::read_dir(p.expect("entry").path()).expect("partition dir") {
            let f = f.expect("entry").path();
            if f.extension().is_some_and(|x| x == "log") {
                size += std::fs::metadata(&f).expect("metadata").len();
            }
        }
    }
    size
}

async fn send_one(server: &Server) {
    let c = client(server).await;
    stream_and_topic(&c, "s", "t", 1).await;
    let mut batch: Vec<IggyMessage> = (0..10u128)
        .map(|i| message(i + 1, &[7u8; 1000], None))
        .collect();
    c.send_messages(
        &named("s"),
        &named("t"),
        &Partitioning::partition_id(0),
        &mut batch,
    )
    .await
    .expect("send");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_are_preallocated_only_where_appends_are_synced() {
    // A disk-backed directory: on tmpfs the engine never preallocates.
    for (fsync, preallocated) in [(FsyncPolicy::Never, false), (FsyncPolicy::Batch, true)] {
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        if corelog_is_on_tmpfs(dir.path()) {
            eprintln!("SKIPPED: /var/tmp is on tmpfs, where nothing is preallocated");
            return;
        }
        let server = start(dir.path(), fsync);
        send_one(&server).await;
        // 10 messages of 1000 B: about 11 KB, far below the first 1 MiB step.
        let size = segment_sizes(dir.path());
        assert_eq!(size >= 1 << 20, preallocated, "fsync {fsync}: {size} bytes");
        assert!(
            size > 10_000,
            "fsync {fsync}: the batch is in the file ({size} bytes)"
        );
        drop(server);
    }
}

fn corelog_is_on_tmpfs(dir: &Path) -> bool {
    std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "tmpfs")
}
