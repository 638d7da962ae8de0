//! What the harness counts, and the summary line it ends with.

use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) cycles: u64,
    pub(crate) kills_early: u64,
    pub(crate) kills_mid: u64,
    pub(crate) clean_exits: u64,
    pub(crate) sent: u64,
    pub(crate) acked: u64,
    pub(crate) unacked_kept: u64,
    pub(crate) unacked_gone: u64,
    pub(crate) lost: u64,
    pub(crate) checks: u64,
    pub(crate) cuts: u64,
    pub(crate) removed_segments: u64,
}

impl Totals {
    /// The summary line; `seed` replays the run.
    pub(crate) fn summary(&self, seed: u64, elapsed: Duration) -> String {
        let t = self;
        format!(
    "corelog-crash: {} cycles ({} killed while starting, {} killed mid-stream, {} clean exits), {} checks ({} tail cuts, {} segments removed); batches: {} sent, {} acknowledged, {} unacknowledged kept, {} unacknowledged gone, {} LOST; {:.1} s; seed {seed}",
    t.cycles,
    t.kills_early,
    t.kills_mid,
    t.clean_exits,
    t.checks,
    t.cuts,
    t.removed_segments,
    t.sent,
    t.acked,
    t.unacked_kept,
    t.unacked_gone,
    t.lost,
            elapsed.as_secs_f64()
        )
    }
}
