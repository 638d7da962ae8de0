//! The simulation's checkers: what the cluster committed (as the nodes
//! apply it), what it acknowledged, and what each node serves.
//!
//! - **One batch per offset**: every committed batch, whichever node
//!   applies it, is byte for byte the one committed at its base offset, and
//!   the committed batches tile the offsets from 0 with no gap.
//! - **Nothing uncommitted served**: every batch a node's log serves (a
//!   poll, verified) is a committed batch, byte for byte, and no log's
//!   commit mark passes the committed end.
//! - **Applied ≤ committed** on every node at every step.
//! - **Nothing acknowledged forgotten**: no node whose disk was never wiped
//!   is told a commit past its log (`Up::step`).
//! - **No acknowledged batch lost**: at the end, with the network healed
//!   and every node up, each node serves exactly the committed log, every
//!   acknowledged batch in it.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Default)]
pub struct Checker {
    /// Committed batches by base offset.
    pub committed: BTreeMap<u64, Bytes>,
    /// The offset after the last committed batch.
    pub end: u64,
    /// Base offsets of the batches acknowledged to clients.
    pub acked: BTreeSet<u64>,
    pub violations: Vec<String>,
    /// The step now running (for the messages).
    pub step: u64,
}

impl Checker {
    pub fn violation(&mut self, node: u64, what: String) {
        self.violations
            .push(format!("step {}: node {node}: {what}", self.step));
    }

    /// Node `node` applies the committed batch `bytes` at `base`..`next`.
    pub fn applied(&mut self, node: u64, base: u64, next: u64, bytes: &Bytes) {
        match self.committed.get(&base) {
            Some(b) if b == bytes => {}
            Some(_) => self.violation(
                node,
                format!("applies a committed batch at offset {base} other than the one committed there"),
            ),
            None if base == self.end => {
                self.committed.insert(base, bytes.clone());
                self.end = next;
            }
            None => self.violation(
                node,
                format!(
                    "applies a committed batch at offset {base}, but the committed batches end at {}",
                    self.end
                ),
            ),
        }
    }

    /// A client was told its batch at `base` is stored.
    pub fn acknowledged(&mut self, base: u64) {
        self.acked.insert(base);
    }

    /// Node `node` serves the batch `bytes` at `base`.
    pub fn served(&mut self, node: u64, base: u64, bytes: &[u8]) {
        match self.committed.get(&base) {
            Some(b) if b.as_ref() == bytes => {}
            Some(_) => self.violation(
                node,
                format!("serves a batch at offset {base} other than the committed one"),
            ),
            None => self.violation(
                node,
                format!("serves a batch at offset {base} that is not committed"),
            ),
        }
    }

    /// Node `node` served `log` (base offset -> bytes) from offset 0 at the
    /// end, with everything healed and settled.
    pub fn final_log(&mut self, node: u64, log: &BTreeMap<u64, Bytes>) {
        for (base, bytes) in &self.committed.clone() {
            match log.get(base) {
                Some(b) if b == bytes => {}
                Some(_) => self.violation(node, format!("holds another batch at offset {base}")),
                None if self.acked.contains(base) => self.violation(
                    node,
                    format!("lost the acknowledged batch at offset {base}"),
                ),
                None => self.violation(node, format!("lost the committed batch at offset {base}")),
            }
        }
        if let Some(extra) = log.keys().find(|b| !self.committed.contains_key(b)) {
            self.violation(
                node,
                format!("serves a batch at offset {extra} that is not committed"),
            );
        }
    }
}
