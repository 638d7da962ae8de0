//! The group's side of its fence (`fence.rs`): which messages a fenced
//! node steps, and when the fence lifts.

use super::fence::Admit;
use super::Group;
use raft::eraftpb::Message;

impl Group {
    /// Steps a peer's message past the fence and the guard for a lost
    /// journal (`false`: the fence dropped it). A fence the message lifts
    /// (this node elected, say) is dropped at once, its marker durably
    /// gone before the `Ready` that follows writes anything: a node
    /// restarted still fenced with what it wrote as leader would hold
    /// back its vote and its candidacy while no one can name it a commit
    /// of its term, and a new cluster would never elect.
    pub(super) fn step_peer(&mut self, mut m: Message) -> bool {
        if !self.fence_admits(&m) {
            return false;
        }
        self.guard_lost_journal(&mut m);
        if let Err(e) = self.raw.step(m) {
            tracing::debug!("group {}: step: {e}", self.id);
        }
        self.check_fence();
        true
    }

    /// Whether `m` may be stepped: a fenced node drops vote requests, and
    /// notes what leaders and candidates tell about the cluster.
    pub(super) fn fence_admits(&mut self, m: &Message) -> bool {
        // Unfenced, only a vote request's mark is looked at: no lock taken
        // on each message.
        let (stored_last, voters) = match self.fence.is_on() {
            true => (self.store.rl().last_index(), self.cluster.ids().len()),
            false => (0, 0),
        };
        match self.fence.admit(m, stored_last, self.raw.raft.term, voters) {
            Admit::Step => true,
            Admit::Lift(why) => {
                self.unfence(&why);
                true
            }
            Admit::Drop => {
                // Fenced, this node's own journal is new; unfenced, the
                // request came marked from a node whose journal is.
                let whose = match self.fence.is_on() {
                    true => "this node's journal is new".to_string(),
                    false => format!("node {}'s journal is new", m.from),
                };
                tracing::debug!(
                    "group {}: a vote request from node {} (its last entry {}) dropped: {whose}",
                    self.id,
                    m.from,
                    m.index
                );
                false
            }
        }
    }

    /// Keeps a fenced node that holds entries from standing for election
    /// (`Fence::hold_candidacy`).
    pub(super) fn hold_candidacy(&mut self) {
        self.fence.hold_candidacy(&mut self.raw);
    }

    /// Lifts the fence once this node has caught up with a leader, or leads.
    pub(super) fn check_fence(&mut self) {
        if !self.fence.is_on() {
            // After every message stepped: nothing more while unfenced.
            return;
        }
        let stored_last = self.store.rl().last_index();
        if let Some(why) = self.fence.lifts(&self.raw, stored_last) {
            self.unfence(&why);
        }
    }

    fn unfence(&mut self, why: &str) {
        self.fence.lift();
        tracing::info!("group {}: this node votes again: {why}", self.id);
        if let Err(e) = self.store.wl().caught_up() {
            // The marker stays: the next start fences again, which is safe.
            tracing::warn!("group {}: {e}", self.id);
        }
    }
}
