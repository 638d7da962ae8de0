//! The run's shape: shards, partitions, producers, consumers, in flight.
//!
//! Its own file because both the run (`run.rs`) and its table
//! (`summary.rs`) need it, and neither may import the other's.

use crate::args::Args;

/// The run's shape, from the flags and the machine.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub cores: usize,
    pub shards: usize,
    pub partitions: u64,
    pub producers: usize,
    pub consumers: usize,
    pub inflight: usize,
}

impl Shape {
    pub fn new(args: &Args) -> Shape {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let shards = args.shards.unwrap_or(cores).max(1);
        Shape {
            cores,
            shards,
            partitions: args.partitions.unwrap_or(2 * shards as u64).max(1),
            producers: args.producers.unwrap_or(shards).max(1),
            consumers: args.consumers.unwrap_or(shards).max(1),
            inflight: args.inflight.max(1),
        }
    }

    /// The partitions worker `i` of `n` takes: `p % n == i`.
    pub fn share(&self, i: usize, n: usize) -> Vec<u64> {
        (0..self.partitions)
            .filter(|p| (*p as usize) % n == i)
            .collect()
    }
}
