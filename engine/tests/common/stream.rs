//! A stream of `batch(p, seq)` batches appended to partition `p`, and read
//! back whole: what the tiered-storage tests compare.
#![allow(clippy::unwrap_used)]

use super::{base_offset_of, batch, message_id, messages_in};
use corelog::{Engine, PollFrom};

/// Appends batches `seqs` of stream `p` to partition `p`.
pub fn fill(engine: &Engine, p: u64, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        engine.handle().append(p, batch(p, seq)).wait().unwrap();
    }
}

/// Every message of `p` from offset 0, by polls of `max` bytes, each
/// verified and each moving on: `(offset, id)` in order.
pub fn read_all(engine: &Engine, p: u64, max: u64) -> Vec<(u64, u128)> {
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let r = engine
            .handle()
            .poll(p, PollFrom::Offset(next), max)
            .wait()
            .unwrap();
        if r.is_empty() {
            return out;
        }
        r.verify(&engine.handle().limits()).unwrap();
        out.extend(r.messages().map(|m| (m.offset(), m.id())));
        assert!(r.next_offset() > next, "a poll from {next} did not move on");
        next = r.next_offset();
    }
}

/// What stream `p`'s first `n` batches hold: `(offset, id)` of each message.
pub fn expected(p: u64, n: u64) -> Vec<(u64, u128)> {
    (0..n)
        .flat_map(|seq| {
            (0..messages_in(seq)).map(move |i| (base_offset_of(seq) + i, message_id(p, seq, i)))
        })
        .collect()
}
