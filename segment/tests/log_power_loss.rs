//! Power loss under `fsync=batch`: whatever a power cut leaves, a reopen
//! finds every acknowledged batch, byte for byte, as a prefix of what was
//! reserved, and appends go on.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog_segment::io::{SimFaults, SimStorage, Storage, StorageFile, WriteBufs};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

/// The order in which 32 concurrent writes on the simulated disk complete.
fn completion_order(seed: u64, max_yields: u32) -> Vec<u64> {
    run_sim(async move {
        let disk = SimStorage::new(seed, 1 << 16);
        disk.create_dir_all(Path::new("/d")).unwrap();
        let file = disk.open(Path::new("/d/f"), true).unwrap();
        disk.set_faults(SimFaults {
            max_yields,
            ..SimFaults::default()
        });
        let order = Rc::new(RefCell::new(Vec::new()));
        let tasks: Vec<_> = (0..32u64)
            .map(|i| {
                let (file, order) = (file.clone(), order.clone());
                monoio::spawn(async move {
                    let bytes = bytes::Bytes::from(vec![i as u8; 16]);
                    file.write_all_at(i * 16, WriteBufs::one(bytes))
                        .await
                        .unwrap();
                    order.borrow_mut().push(i);
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        let order = order.borrow().clone();
        order
    })
}

/// Regression: the simulated disk's yields woke the task from inside its
/// own poll, which monoio answers by running the same task again at once,
/// so no other task ever ran in between: concurrent operations always
/// completed in issue order and the fault tests never saw a reordering.
#[test]
fn sim_yields_let_concurrent_operations_complete_out_of_order() {
    let in_order: Vec<u64> = (0..32).collect();
    assert_eq!(completion_order(1, 0), in_order, "no yields, no reordering");
    for seed in 1..=4 {
        let order = completion_order(seed, 8);
        assert_ne!(order, in_order, "seed {seed}: yields must interleave tasks");
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, in_order, "seed {seed}: every write completes once");
        assert_eq!(
            completion_order(seed, 8),
            order,
            "seed {seed}: a run is replayable from its seed"
        );
    }
}
