//! `--target tcp://ADDR`: the same workload, over Iggy's TCP protocol, to
//! any server that speaks it (corelog-server, or a real Iggy server).
//!
//! Producer lanes are threads with a connection each (one request in flight
//! per connection, as with Iggy's SDK) sending the same pre-built batches
//! as the embedded run; consumers poll every partition back from offset 0
//! with the offset strategy, verifying every batch's checksums with
//! corelog's admission check unless `--no-verify`.

mod client;
mod run;

pub use run::run;
