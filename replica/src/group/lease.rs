//! Whether a leader still leads: it names itself leader to clients only
//! while a majority has confirmed it recently.
//!
//! raft-rs's own check (`check_quorum`) runs on ticks: a leader that was
//! paused (`SIGSTOP`, a stalled VM) for longer than an election timeout
//! resumes still leader in its own eyes, and stays so until its peers'
//! messages reach it or enough ticks pass, while the others have elected
//! someone else. Asked who leads in that window, it would name itself, and
//! Iggy's SDK would stay with it and replay its send there for two seconds
//! before asking again.
//!
//! So a leader asks its peers to confirm it, every heartbeat interval,
//! with raft-rs's read index (`ReadOnlyOption::Safe`: a heartbeat carrying
//! a context, answered by a majority in the leader's term). The context is
//! the time it asked; once a majority answered, the leader is confirmed
//! until that time plus an election timeout: no other leader can have been
//! elected before then. Answers buffered while the node was paused confirm
//! only the time of the question they answer, long past.
//!
//! | this node, in group 0                             | `GET_CLUSTER_METADATA` names |
//! |---------------------------------------------------|------------------------------|
//! | leader, confirmed as of less than a timeout ago   | this node                    |
//! | leader, not confirmed since                       | no leader (the SDK waits)    |
//! | follower of a known leader                        | that leader                  |
//! | candidate, or no leader known                     | no leader                    |
//!
//! Advisory: it decides what this node tells clients, not what Raft
//! commits, which needs a majority whatever the lease says.

/// What a lease question's context starts with.
const TAG: [u8; 5] = *b"lease";

/// Until when this node's leadership is confirmed.
#[derive(Debug, Default)]
pub(super) struct LeaderLease {
    /// Milliseconds on the node's clock (`Shared::ms_of`); 0: not confirmed.
    pub until_ms: u64,
}

impl LeaderLease {
    /// The read index context of a question asked at `at_ms`: a tag, then
    /// the time.
    pub fn question(at_ms: u64) -> Vec<u8> {
        let mut ctx = TAG.to_vec();
        ctx.extend_from_slice(&at_ms.to_le_bytes());
        ctx
    }

    /// A majority answered the question `ctx`: confirmed until it was
    /// asked plus `window_ms`. Another context (not ours) is ignored.
    pub fn answered(&mut self, ctx: &[u8], window_ms: u64) {
        let time = ctx.strip_prefix(TAG.as_slice());
        if let Some(Ok(b)) = time.map(<[u8; 8]>::try_from) {
            let asked = u64::from_le_bytes(b);
            self.until_ms = self.until_ms.max(asked.saturating_add(window_ms));
        }
    }

    /// Leadership changed: nothing is confirmed.
    pub fn reset(&mut self) {
        self.until_ms = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::LeaderLease;

    #[test]
    fn an_answer_confirms_from_when_its_question_was_asked() {
        let mut l = LeaderLease::default();
        assert_eq!(l.until_ms, 0);
        l.answered(&LeaderLease::question(1_000), 500);
        assert_eq!(l.until_ms, 1_500);
        // An answer to an older question, arriving late, takes nothing back
        // and extends nothing.
        l.answered(&LeaderLease::question(900), 500);
        assert_eq!(l.until_ms, 1_500);
        l.answered(&LeaderLease::question(1_200), 500);
        assert_eq!(l.until_ms, 1_700);
        l.answered(b"not ours", 500);
        l.answered(&9_999u64.to_le_bytes(), 500);
        assert_eq!(l.until_ms, 1_700);
        l.reset();
        assert_eq!(l.until_ms, 0);
    }
}
