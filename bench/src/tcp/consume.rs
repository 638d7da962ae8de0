//! Consumers of a TCP run: every partition polled back from offset 0 to
//! what producers sent, each batch walked (and verified unless
//! `--no-verify`).

use super::shared::{named, Shared, STREAM, TOPIC};
use crate::args::Args;
use crate::report::Phase;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::codes::POLL_MESSAGES_CODE;
use iggy_binary_protocol::requests::messages::PollMessagesRequest;
use iggy_binary_protocol::{WireConsumer, WireIdentifier, WirePollingStrategy};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Messages per poll: about `--poll-bytes`, whole batches.
pub fn poll_count(args: &Args) -> u32 {
    let per_message = (args.message_size.min + args.message_size.max) / 2 + 48;
    let batches =
        (args.poll_bytes as usize / (per_message * args.messages_per_batch).max(1)).max(1);
    u32::try_from(batches * args.messages_per_batch).unwrap_or(u32::MAX)
}

/// One consumer: polls `parts` from offset 0 to what producers sent.
pub fn consume(s: &Shared, parts: &[u32], count: u32, verify: bool) -> Result<Phase, String> {
    let mut client = s.connect()?;
    let limits = corelog::Limits {
        max_batch_bytes: u64::MAX,
    };
    let mut phase = Phase::new("poll");
    for &p in parts {
        let target = s.sent[p as usize].load(Ordering::Relaxed);
        let mut next = 0u64;
        while next < target {
            let request = PollMessagesRequest {
                consumer: WireConsumer::consumer(WireIdentifier::numeric(1)),
                stream_id: named(STREAM)?,
                topic_id: named(TOPIC)?,
                partition_id: Some(p),
                strategy: WirePollingStrategy::offset(next),
                count,
                auto_commit: false,
            }
            .to_bytes();
            let started = Instant::now();
            let body = client
                .call(POLL_MESSAGES_CODE, &[&request])
                .map_err(|e| format!("poll partition {p}: {e}"))?;
            let got = Instant::now();
            let batches = body.get(16..).ok_or("poll reply shorter than its prefix")?;
            let (messages, count_batches, after) = walk(batches, verify, &limits)
                .map_err(|e| format!("partition {p} at offset {next}: {e}"))?;
            if messages == 0 {
                return Err(format!("partition {p}: empty poll at {next} of {target}"));
            }
            let _ = phase.latency.record((got - started).as_nanos() as u64);
            phase.bytes += batches.len() as u64;
            phase.messages += messages;
            phase.batches += count_batches;
            next = after;
        }
    }
    Ok(phase)
}

/// Walks the batches of a poll reply (verifying them when asked); returns
/// messages, batches and the offset after the last message.
fn walk(
    mut rest: &[u8],
    verify: bool,
    limits: &corelog::Limits,
) -> Result<(u64, u64, u64), String> {
    let (mut messages, mut batches, mut after) = (0u64, 0u64, 0u64);
    while !rest.is_empty() {
        let len =
            corelog::testing::segment::declared_length(rest, limits).map_err(|e| e.to_string())?;
        let one = rest.get(..len as usize).ok_or("torn batch in the reply")?;
        if verify {
            corelog::testing::segment::check(one, limits).map_err(|e| e.to_string())?;
        }
        let field = |at: usize, n: usize| {
            one.get(at..at + n).map(|b| {
                let mut v = [0u8; 8];
                v[..n].copy_from_slice(b);
                u64::from_le_bytes(v)
            })
        };
        let base = field(8, 8).ok_or("short batch header")?;
        let count = field(48, 4).ok_or("short batch header")?;
        messages += count;
        batches += 1;
        after = base + count;
        rest = &rest[len as usize..];
    }
    Ok((messages, batches, after))
}
