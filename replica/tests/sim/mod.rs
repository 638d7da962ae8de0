//! A deterministic cluster simulation (issue 28 §4): three nodes in one
//! thread, each on its own `SimStorage`, with raft-rs, the real partition
//! log (commit mark, crash-safe suffix cut, recovery) and the replica's
//! journal records; a seeded network (delays, reordering, drops,
//! duplicates, partitions); seeded power cuts of one node or all of them,
//! at any point of a `Ready`'s persistence, with torn writes; a node's disk
//! wiped now and then (while no other node is fenced), so the wiped node's
//! fence and its catch-up are searched too; time as
//! ticks. The checkers (`check.rs`) run after every step. Everything comes
//! from one seed, so a failing seed replays.
//!
//! What it models rather than runs: the data group's loop
//! (`replica/src/group`), whose order of persistence `node.rs` follows. The
//! group itself owns threads, TCP and the clock.

pub mod bugs;
pub mod check;
pub mod journal;
pub mod net;
pub mod node;

pub use bugs::Bugs;
use check::Checker;
use corelog::testing::segment::io::{SimFaults, SimStorage};
use net::{Net, NetFaults};
use node::{Fatal, Up};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub seed: u64,
    /// Steps with faults, then up to as many again to settle without.
    pub ticks: u64,
    pub bugs: Bugs,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub violations: Vec<String>,
    pub committed: usize,
    pub acked: usize,
    pub power_cuts: u64,
    pub torn_readies: u64,
    /// Nodes stopped by a failed `fdatasync` (then power-cut).
    pub failed_syncs: u64,
    /// Disks wiped (the node restarting with an empty directory).
    pub wipes: u64,
    pub partitions: u64,
    pub messages: u64,
    pub dropped: u64,
    /// XXH3 of the committed log: equal for equal seeds.
    pub digest: u64,
}

struct Node {
    id: u64,
    disk: SimStorage,
    up: Option<Up>,
    /// The `sync_data` call (by the disk's count) set to fail with EIO.
    sync_fails_at: Option<u64>,
    /// The node's disk was wiped in this run.
    wiped: bool,
    /// What its journal, made new, is marked with: another after a wipe.
    incarnation: u64,
}

impl Node {
    /// Whether the failure set on this node's disk has happened: the
    /// error it led to is the fault's, not a bug's.
    fn sync_failed(&self) -> bool {
        self.sync_fails_at
            .is_some_and(|n| self.disk.counters().syncs > n)
    }
}

struct Sim {
    p: Params,
    rng: fastrand::Rng,
    nodes: Vec<Node>,
    net: Net,
    check: Checker,
    rates: Rates,
    now: u64,
    tag: u64,
    out: Outcome,
}

/// Runs one seed. A panic (raft-rs's own assertions included, such as a
/// leader's commit index past a follower's log) is a violation.
pub fn run(p: Params) -> Outcome {
    let run = std::panic::catch_unwind(move || {
        // The timer: a log's close (a cut closes it) waits for segments
        // being sealed by polling every millisecond. The order of the disk's
        // operations does not depend on it (the simulated disk answers at
        // once), so a seed still replays.
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("a monoio runtime")
            .block_on(async move {
                let mut sim = Sim::new(p);
                sim.run().await;
                sim.out
            })
    });
    run.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome {
            violations: vec![format!("panicked: {what}")],
            ..Outcome::default()
        }
    })
}

impl Sim {
    fn new(p: Params) -> Sim {
        let mut rng = fastrand::Rng::with_seed(p.seed);
        let nodes = (1..=3)
            .map(|id| Node {
                id,
                disk: interleaved(SimStorage::new(rng.u64(..), 1 << 20)),
                up: None,
                sync_fails_at: None,
                wiped: false,
                incarnation: id,
            })
            .collect();
        let net = Net::new(
            rng.u64(..),
            NetFaults {
                drop_per_mille: 20,
                dup_per_mille: 10,
                max_delay: 3,
            },
        );
        let rates = Rates::draw(&mut rng);
        Sim {
            p,
            rng,
            rates,
            nodes,
            net,
            check: Checker::default(),
            now: 0,
            tag: 0,
            out: Outcome::default(),
        }
    }

    async fn run(&mut self) {
        for i in 0..3 {
            self.start(i).await;
        }
        for _ in 0..self.p.ticks {
            self.step(true).await;
            if !self.check.violations.is_empty() {
                return self.finish();
            }
        }
        // Settle: the network healed, every node up, no more faults or
        // sends, until every node has applied the same committed log.
        self.net.isolated = None;
        self.net.link_down = None;
        self.net.faults.drop_per_mille = 0;
        self.net.faults.dup_per_mille = 0;
        for n in &mut self.nodes {
            if n.sync_fails_at.take().is_some() {
                n.disk = interleaved(n.disk.clone());
            }
        }
        let mut settled = false;
        for _ in 0..self.p.ticks.max(2000) {
            self.step(false).await;
            if !self.check.violations.is_empty() {
                return self.finish();
            }
            if self.settled() {
                settled = true;
                break;
            }
        }
        if !settled {
            let states: Vec<String> = self
                .nodes
                .iter()
                .map(|n| match &n.up {
                    None => format!("node {}: down", n.id),
                    Some(u) => {
                        let l = &u.raw.raft.raft_log;
                        format!(
                            "node {}: {:?} term {} last {} committed {} applied {} commit_end {} log end {} fenced {} peers {:?}",
                            n.id,
                            u.raw.raft.state,
                            u.raw.raft.term,
                            l.last_index(),
                            l.committed,
                            u.applied,
                            u.commit_end,
                            u.log.stats().end_offset,
                            u.fence.is_on(),
                            u.raw
                                .raft
                                .prs()
                                .iter()
                                .map(|(id, p)| format!(
                                    "{id}: {:?} matched {} next {}",
                                    p.state, p.matched, p.next_idx
                                ))
                                .collect::<Vec<_>>()
                        )
                    }
                })
                .collect();
            self.check.violation(
                0,
                format!(
                    "the cluster did not settle once healed (committed end {}): {states:?}",
                    self.check.end
                ),
            );
            if self.agreed() {
                // Settled short of what was committed: what each node
                // serves, against the committed log, names what was lost.
                self.final_logs();
            }
            return self.finish();
        }
        self.final_logs();
        self.finish()
    }

    /// Checks every node's served log against the committed one.
    fn final_logs(&mut self) {
        for n in &self.nodes {
            let Some(up) = &n.up else { continue };
            match up.served_log() {
                Ok(log) => self.check.final_log(n.id, &log),
                Err(e) => self.check.violation(n.id, e),
            }
        }
    }

    fn finish(&mut self) {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for (base, b) in &self.check.committed {
            h.update(&base.to_le_bytes());
            h.update(b);
        }
        self.out.digest = h.digest();
        self.out.committed = self.check.committed.len();
        self.out.acked = self.check.acked.len();
        self.out.messages = self.net.sent;
        self.out.dropped = self.net.dropped;
        self.out.violations = std::mem::take(&mut self.check.violations);
    }

    /// Every node up, one leading, and all applied the same last entry of
    /// one log, which ends where the committed batches end.
    fn settled(&self) -> bool {
        self.agreed()
            && self.nodes.iter().all(|n| {
                n.up.as_ref()
                    .is_some_and(|u| u.commit_end == self.check.end)
            })
    }

    /// Every node up, one leading, and all applied the same last entry.
    fn agreed(&self) -> bool {
        let ups: Vec<&Up> = self.nodes.iter().filter_map(|n| n.up.as_ref()).collect();
        ups.len() == 3
            && ups.iter().any(|u| u.is_leader())
            && ups.iter().all(|u| {
                let l = &u.raw.raft.raft_log;
                u.applied == l.committed
                    && l.committed == l.last_index()
                    && l.last_index() == ups[0].raw.raft.raft_log.last_index()
            })
    }

    async fn start(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        match Up::start(n.id, &n.disk, &self.p.bugs, n.incarnation).await {
            Ok(up) => n.up = Some(up),
            Err(_) if n.sync_failed() => self.sync_failure(i),
            Err(e) => self.check.violation(n.id, format!("restart: {e}")),
        }
    }

    /// A power cut on node `i`: what it had not synced may land, tear or
    /// vanish (`SimStorage::crash`).
    fn power_cut(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        n.up = None;
        n.disk = interleaved(n.disk.crash());
        n.sync_fails_at = None;
        self.out.power_cuts += 1;
    }

    /// Node `i`'s disk replaced by an empty one: it restarts as a wiped
    /// node, fenced until it has caught up. Only while every other node
    /// holds its journal unfenced: two nodes of three that forgot their
    /// votes are a majority no fence can stop.
    fn wipe(&mut self, i: usize) {
        let others_fenced = (0..3).filter(|&j| j != i).any(|j| {
            let n = &self.nodes[j];
            match &n.up {
                Some(u) => u.fence.is_on() || u.lifted,
                None => node::fenced_on_disk(&n.disk),
            }
        });
        if others_fenced {
            return;
        }
        let n = &mut self.nodes[i];
        n.up = None;
        n.disk = interleaved(SimStorage::new(self.rng.u64(..), 1 << 20));
        n.sync_fails_at = None;
        n.wiped = true;
        n.incarnation += 3;
        self.out.wipes += 1;
    }

    async fn step(&mut self, faults: bool) {
        self.now += 1;
        self.check.step = self.now;
        if faults {
            self.faults().await;
            self.clients();
        } else {
            // Settling: every node down comes back.
            for i in 0..3 {
                if self.nodes[i].up.is_none() {
                    self.start(i).await;
                }
            }
        }
        for n in &mut self.nodes {
            if let Some(up) = &mut n.up {
                // raft-rs draws each election timeout from the thread's
                // random generator when it resets the election clock; the
                // simulation draws it again, from the seed, before the
                // clock first moves.
                if up.raw.raft.election_elapsed == 0 {
                    let t = self
                        .rng
                        .usize(node::ELECTION_TICKS..2 * node::ELECTION_TICKS);
                    up.raw.raft.set_randomized_election_timeout(t);
                }
                up.fence.hold_candidacy(&mut up.raw);
                up.raw.tick();
            }
        }
        for m in self.net.due(self.now) {
            let to = m.to as usize - 1;
            let wiped = self.nodes[to].wiped;
            if let Some(up) = &mut self.nodes[to].up {
                up.step(m.to, m, &mut self.net, &mut self.check, wiped);
            }
        }
        for _round in 0..4 {
            let mut any = false;
            for i in 0..3 {
                let ready = self.nodes[i].up.as_ref().is_some_and(|u| u.raw.has_ready());
                if !ready {
                    continue;
                }
                any = true;
                self.ready(i, faults).await;
            }
            if !any {
                break;
            }
        }
        for n in &mut self.nodes {
            if let Some(up) = &mut n.up {
                if let Err(e) = up.check_fence().await {
                    self.check.violation(n.id, e);
                }
                up.check_served(n.id, &mut self.check);
            }
        }
    }

    /// Node `i` handles a `Ready`; under faults, now and then the power is
    /// cut partway through its persistence.
    async fn ready(&mut self, i: usize, faults: bool) {
        let cut_after = (faults && self.rng.u32(..1000) < 8).then(|| self.rng.u32(0..40));
        let (id, bugs) = (self.nodes[i].id, self.p.bugs);
        let Some(up) = self.nodes[i].up.as_mut() else {
            return;
        };
        let done: Option<Result<(), Fatal>> = {
            let fut = up.handle_ready(id, &mut self.net, &mut self.check, &bugs);
            match cut_after {
                Some(polls) => {
                    PowerCutAfter {
                        fut: Box::pin(fut),
                        polls,
                    }
                    .await
                }
                None => Some(fut.await),
            }
        };
        match done {
            Some(Ok(())) => {}
            Some(Err(_)) if self.nodes[i].sync_failed() => self.sync_failure(i),
            Some(Err(e)) => {
                self.check.violation(id, e);
            }
            None => {
                self.out.torn_readies += 1;
                self.power_cut(i);
            }
        }
    }

    /// Node `i`'s failed sync stopped it, as it stops a data group; what
    /// the failed sync dropped may be gone, so the power is cut too.
    fn sync_failure(&mut self, i: usize) {
        self.out.failed_syncs += 1;
        self.power_cut(i);
    }

    async fn faults(&mut self) {
        if self.rng.u32(..10_000) < 20 {
            // A node's `fdatasync` fails (EIO) a few syncs from now.
            let i = self.rng.usize(..3);
            let n = &mut self.nodes[i];
            if n.up.is_some() && n.sync_fails_at.is_none() {
                let at = n.disk.counters().syncs + self.rng.u64(0..6);
                n.disk.set_faults(SimFaults {
                    max_yields: MAX_YIELDS,
                    fail_sync_at: Some(at),
                    ..SimFaults::default()
                });
                n.sync_fails_at = Some(at);
            }
        }
        if self.rng.u32(..10_000) < self.rates.wipe {
            let i = self.rng.usize(..3);
            self.wipe(i);
        }
        if self.rng.u32(..10_000) < self.rates.power_cut {
            let i = self.rng.usize(..3);
            if self.nodes[i].up.is_some() {
                self.power_cut(i);
            }
        }
        let r = self.rng.u32(..10_000);
        if r < 5 {
            // Every node at once.
            for i in 0..3 {
                if self.nodes[i].up.is_some() {
                    self.power_cut(i);
                }
            }
        } else if r < 55 && self.net.isolated.is_none() {
            self.net.isolated = Some(self.rng.u64(1..=3));
            self.out.partitions += 1;
        } else if r < 105 && self.net.link_down.is_none() {
            let a = self.rng.u64(1..=3);
            let b = a % 3 + 1;
            self.net.link_down = Some((a, b));
            self.out.partitions += 1;
        } else if r < 320 {
            self.net.isolated = None;
        } else if r < 570 {
            self.net.link_down = None;
        }
        for i in 0..3 {
            if self.nodes[i].up.is_none() && self.rng.u32(..1000) < self.rates.restart {
                self.start(i).await;
            }
        }
    }

    /// Clients send to a node that believes it leads (a stale leader too).
    fn clients(&mut self) {
        if self.rng.u32(..100) >= 60 {
            return;
        }
        let leaders: Vec<usize> = (0..3)
            .filter(|&i| self.nodes[i].up.as_ref().is_some_and(|u| u.is_leader()))
            .collect();
        if leaders.is_empty() {
            return;
        }
        let i = leaders[self.rng.usize(..leaders.len())];
        for _ in 0..self.rng.usize(1..=3) {
            self.tag += 1;
            let (count, size) = (self.rng.usize(1..=4), self.rng.usize(1..=200));
            let now = self.now;
            if let Some(up) = self.nodes[i].up.as_mut() {
                up.propose(self.tag, count, size, now);
            }
        }
    }
}

const MAX_YIELDS: u32 = 3;

/// How often a seed's faults come (swarm testing: each seed draws its own
/// mix, so some stress what others barely touch, such as a node down for
/// long while another's disk is wiped and the leader fails).
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// Steps, of 10,000, that cut one node's power.
    power_cut: u32,
    /// Steps, of 1,000, that bring a node that is down back.
    restart: u32,
    /// Steps, of 10,000, that wipe a node's disk.
    wipe: u32,
}

impl Rates {
    fn draw(rng: &mut fastrand::Rng) -> Rates {
        Rates {
            power_cut: [30, 120, 300][rng.usize(..3)],
            restart: [50, 10, 3][rng.usize(..3)],
            wipe: [15, 60][rng.usize(..2)],
        }
    }
}

/// `disk`, its operations yielding to the scheduler a seeded number of
/// times, so a node's writes complete in varied orders.
fn interleaved(disk: SimStorage) -> SimStorage {
    disk.set_faults(SimFaults {
        max_yields: MAX_YIELDS,
        ..SimFaults::default()
    });
    disk
}

/// Runs a future for at most `polls` polls; `None` if the power was cut
/// first (the future is dropped where it stood, its writes issued so far
/// left to the disk's fate).
struct PowerCutAfter<F> {
    fut: Pin<Box<F>>,
    polls: u32,
}

impl<F: Future> Future for PowerCutAfter<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.polls == 0 {
            return Poll::Ready(None);
        }
        self.polls -= 1;
        self.fut.as_mut().poll(cx).map(Some)
    }
}
