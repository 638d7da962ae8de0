//! `--target tcp://ADDR`: the same workload, over Iggy's TCP protocol, to
//! any server that speaks it (corelog-server, or a real Iggy server).
//!
//! Producer lanes are threads with a connection each (one request in flight
//! per connection, as with Iggy's SDK) sending the same pre-built batches
//! as the embedded run, closed loop or, with `--rate`, open loop on a fixed
//! schedule with latency from each batch's due time (`produce.rs`);
//! consumers poll every partition back from offset 0 with the offset
//! strategy, verifying every batch's checksums with corelog's admission
//! check unless `--no-verify` (`consume.rs`).

mod client;
mod consume;
mod produce;
mod rate;
mod run;
mod shared;
#[cfg(test)]
mod tests;

pub use run::run;
