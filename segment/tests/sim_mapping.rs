//! The simulated disk keeps the mapping contract: nothing writes bytes a
//! mapping may hand out.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::log::{PartitionLog, PollFrom};
use std::path::Path;

/// The simulator's writes around the log's back (bit rot, truncation, test
/// setup) would change bytes a poll reply may hold; they are refused while
/// the file is mapped, and work again once the log and its replies are gone.
#[test]
fn sim_refuses_to_write_under_a_live_mapping() {
    run(async {
        let dir = Path::new("/sim/mapped");
        let config = small_config();
        let disk = sim_for(3, &config);
        let (log, _) = PartitionLog::open(disk.clone(), dir, 1, config.clone())
            .await
            .unwrap();
        log.append(batch(0, 2, 100)).await.unwrap();
        log.flush().await.unwrap();
        let reply = log.poll(PollFrom::First, 1 << 20).unwrap();
        let seg = dir.join("00000000000000000000.log");
        let before = disk.file_bytes(&seg).unwrap();
        assert!(!disk.corrupt(&seg, 300, &[0xff]), "corrupt under a mapping");
        assert!(!disk.set_len(&seg, 10), "truncate under a mapping");
        let refused = disk.put_file(&seg, b"x").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc_ebusy()));
        assert_eq!(disk.file_bytes(&seg).unwrap(), before, "nothing changed");
        log.close().await.unwrap();
        drop(log);
        assert!(
            !disk.corrupt(&seg, 300, &[0xff]),
            "the poll reply still maps the segment"
        );
        drop(reply);
        assert!(disk.corrupt(&seg, 300, &[0xff]), "unmapped: allowed again");
    });
}

/// `EBUSY` on Linux.
fn libc_ebusy() -> i32 {
    16
}
