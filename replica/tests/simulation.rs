//! The deterministic cluster simulation (`sim/`): seeds in `cargo test`,
//! more behind `CORELOG_SIM_SEEDS=N`, one replayed with
//! `CORELOG_SIM_SEED=S`; each planted bug of `sim::Bugs` must be caught.
#![allow(clippy::unwrap_used)]

mod sim;

use sim::{run, Bugs, Outcome, Params};

const TICKS: u64 = 1500;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn one(seed: u64, bugs: Bugs) -> Outcome {
    run(Params {
        seed,
        ticks: env_u64("CORELOG_SIM_TICKS").unwrap_or(TICKS),
        bugs,
    })
}

#[test]
fn seeded_runs_find_no_violation() {
    let seeds: Vec<u64> = match env_u64("CORELOG_SIM_SEED") {
        Some(s) => vec![s],
        None => (1..=env_u64("CORELOG_SIM_SEEDS").unwrap_or(32)).collect(),
    };
    let mut total = Outcome::default();
    for seed in seeds {
        let o = one(seed, Bugs::default());
        assert!(
            o.violations.is_empty(),
            "seed {seed} (replay: CORELOG_SIM_SEED={seed} cargo test -p corelog-replica --test simulation): {:#?}",
            o.violations
        );
        eprintln!(
            "seed {seed}: {} committed, {} acknowledged, {} power cuts ({} mid-persistence, {} after a failed sync), {} wipes, {} partitions, {} messages ({} dropped)",
            o.committed, o.acked, o.power_cuts, o.torn_readies, o.failed_syncs, o.wipes, o.partitions, o.messages, o.dropped
        );
        total.committed += o.committed;
        total.acked += o.acked;
        total.power_cuts += o.power_cuts;
        total.torn_readies += o.torn_readies;
        total.failed_syncs += o.failed_syncs;
        total.wipes += o.wipes;
    }
    if env_u64("CORELOG_SIM_SEED").is_some() {
        return;
    }
    // The runs did what they are for: batches committed and acknowledged
    // across power cuts, some of them partway through a Ready, some after
    // a failed sync, some nodes' disks wiped.
    assert!(total.acked > 0 && total.committed >= total.acked);
    assert!(
        total.power_cuts > 0 && total.torn_readies > 0 && total.failed_syncs > 0 && total.wipes > 0,
        "{total:?}"
    );
}

#[test]
fn a_run_replays_from_its_seed() {
    let (a, b) = (one(7, Bugs::default()), one(7, Bugs::default()));
    assert_eq!(
        (a.digest, a.committed, a.acked, a.power_cuts, a.messages),
        (b.digest, b.committed, b.acked, b.power_cuts, b.messages)
    );
    assert_ne!(a.digest, one(8, Bugs::default()).digest);
}

/// Each planted bug is caught within a few seeds.
fn caught(bugs: Bugs) -> Vec<String> {
    let seeds = match env_u64("CORELOG_SIM_SEED") {
        Some(s) => s..=s,
        None => 1..=env_u64("CORELOG_SIM_BUG_SEEDS").unwrap_or(24),
    };
    for seed in seeds {
        let o = one(seed, bugs);
        if !o.violations.is_empty() {
            eprintln!("{bugs:?} caught by seed {seed}: {:?}", o.violations);
            return o.violations;
        }
    }
    panic!("{bugs:?} passed every seed");
}

#[test]
fn acknowledging_before_the_durable_point_is_caught() {
    // A follower that said it held entries a power cut then took: the
    // leader's heartbeat names a commit past the follower's log (raft-rs's
    // own assertion, were it not for the guard for a lost journal, which
    // a node whose disk was never wiped must never need), or an
    // acknowledged batch is gone.
    let v = caught(Bugs {
        ack_before_durable: true,
        ..Bugs::default()
    });
    assert!(
        v.iter().any(|v| v.contains("out of range")
            || v.contains("lost the acknowledged")
            || v.contains("lost entries it acknowledged")),
        "{v:?}"
    );
}

#[test]
fn serving_uncommitted_batches_is_caught() {
    let v = caught(Bugs {
        serve_uncommitted: true,
        ..Bugs::default()
    });
    assert!(v.iter().any(|v| v.contains("not committed")), "{v:?}");
}

#[test]
fn keeping_a_replaced_suffix_is_caught() {
    // The new leader's batch meets the old suffix where it belongs.
    let v = caught(Bugs {
        no_cut: true,
        ..Bugs::default()
    });
    assert!(v.iter().any(|v| v.contains("the log refused")), "{v:?}");
}

#[test]
fn keeping_a_stray_batch_past_the_journal_is_caught() {
    let v = caught(Bugs {
        no_reconcile: true,
        ..Bugs::default()
    });
    assert!(v.iter().any(|v| v.contains("the log refused")), "{v:?}");
}

/// Whether `v` names an acknowledged or committed batch lost or replaced.
fn lost(v: &[String]) -> bool {
    v.iter().any(|v| {
        v.contains("lost the")
            || v.contains("other than the one committed")
            || v.contains("out of range")
    })
}

#[test]
fn a_wiped_node_voting_at_once_is_caught() {
    // Its vote, with a lagging node's, elects a leader lacking what the
    // wiped node acknowledged before it lost its disk.
    let v = caught(Bugs {
        no_fence: true,
        ..Bugs::default()
    });
    assert!(lost(&v), "{v:?}");
}
