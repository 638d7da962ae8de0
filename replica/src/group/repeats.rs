//! The group's client table: each client's last send and its outcome, so
//! that a send the client repeats (Iggy's SDK repeats one answered "not
//! committed", whose outcome it cannot know) is answered from the first one
//! instead of being stored again.
//!
//! A repeat is the same client, session and request number **and the same
//! batch** (its identity: a hash of the producer's header and every frame's
//! checksum). The batch counts because the SDK at this protocol version
//! gives every partition request the id the next metadata request will
//! claim: consecutive sends of a session share their request number, and
//! only their bytes tell them apart. So two sends in a row of byte-identical
//! batches (same message ids, timestamps and payloads) with no metadata
//! request between them are stored once.
//!
//! | the repeat finds its request                  | answered                      |
//! |-----------------------------------------------|-------------------------------|
//! | stored (its acknowledgement kept)             | at once, with that ack        |
//! | in this node's log, not yet applied           | when that entry is applied    |
//! | gone: its entry was overwritten, or unknown   | proposed as a new send        |
//!
//! The table is this node's, in memory: it knows the sends proposed here
//! (the leader's) and what became of them, whether this node still leads
//! or not. A repeat that reaches another node is a new send there (Iggy's
//! SDK repeats on the same connection only; after a redirect it signs in
//! again and numbers its requests anew). Bounded: past `CAPACITY` clients,
//! the ones whose last send is settled are forgotten.

use corelog::AppendAck;
use std::collections::{BTreeMap, HashMap};

/// Clients remembered per group before settled ones are forgotten.
const CAPACITY: usize = 65_536;

/// A client's last send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastSend {
    pub session: u64,
    pub request: u64,
    /// The batch's identity (`Batch::identity`).
    pub batch: u64,
    /// Its entry.
    pub index: u64,
    /// The term it was proposed in.
    pub term: u64,
    /// Set once stored.
    pub ack: Option<AppendAck>,
}

/// A send as the table tells it from another: its session, request number
/// and batch identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendId {
    pub session: u64,
    pub request: u64,
    pub batch: u64,
}

impl SendId {
    fn matches(&self, l: &LastSend) -> bool {
        (l.session, l.request, l.batch) == (self.session, self.request, self.batch)
    }
}

/// What to do with a send.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Not a repeat: propose it.
    New,
    /// A repeat of a stored send: answer with its ack.
    Stored(AppendAck),
    /// A repeat of a send whose entry (index, term) is not applied yet.
    Pending { index: u64, term: u64 },
}

#[derive(Debug, Default)]
pub(crate) struct RepeatTable {
    last: HashMap<u128, LastSend>,
    /// Entries not yet applied, and whose send they carry.
    pending: BTreeMap<u64, u128>,
}

impl RepeatTable {
    /// Whether a send repeats one this node knows. Client 0 is "unknown":
    /// never a repeat.
    pub(crate) fn check(&self, client: u128, send: SendId) -> Repeat {
        match self.last.get(&client) {
            Some(l) if client != 0 && send.matches(l) => match l.ack {
                Some(ack) => Repeat::Stored(ack),
                None => Repeat::Pending {
                    index: l.index,
                    term: l.term,
                },
            },
            _ => Repeat::New,
        }
    }

    /// A send was proposed as entry `index` in `term`.
    pub(crate) fn proposed(&mut self, client: u128, send: SendId, index: u64, term: u64) {
        if client == 0 {
            return;
        }
        if let Some(old) = self.last.insert(
            client,
            LastSend {
                session: send.session,
                request: send.request,
                batch: send.batch,
                index,
                term,
                ack: None,
            },
        ) {
            if old.ack.is_none() {
                self.pending.remove(&old.index);
            }
        }
        self.pending.insert(index, client);
        if self.last.len() > CAPACITY {
            self.last.retain(|_, l| l.ack.is_none());
        }
    }

    /// Entry `index` of `term` was applied, storing `ack` (or nothing).
    /// A pending send whose entry was overwritten (another term at its
    /// index) is forgotten: it was never stored.
    pub(crate) fn applied(&mut self, index: u64, term: u64, ack: Option<AppendAck>) {
        while let Some((&i, &client)) = self.pending.first_key_value() {
            if i > index {
                break;
            }
            self.pending.remove(&i);
            let Some(l) = self.last.get_mut(&client) else {
                continue;
            };
            if l.index != i {
                continue;
            }
            match ack {
                Some(ack) if i == index && l.term == term => l.ack = Some(ack),
                _ => {
                    self.last.remove(&client);
                }
            }
        }
    }

    /// Everything pending is forgotten (the log was replaced by a snapshot).
    pub(crate) fn clear_pending(&mut self) {
        for (_, client) in std::mem::take(&mut self.pending) {
            if self.last.get(&client).is_some_and(|l| l.ack.is_none()) {
                self.last.remove(&client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Repeat, RepeatTable, SendId};
    use corelog::AppendAck;

    fn ack(offset: u64) -> AppendAck {
        let mut ack = AppendAck::default();
        ack.base_offset = offset;
        ack.message_count = 1;
        ack.bytes = 1;
        ack
    }

    fn send(session: u64, request: u64, batch: u64) -> SendId {
        SendId {
            session,
            request,
            batch,
        }
    }

    #[test]
    fn a_repeat_finds_its_send_pending_then_stored() {
        let mut c = RepeatTable::default();
        let s = send(1, 5, 99);
        assert_eq!(c.check(7, s), Repeat::New);
        c.proposed(7, s, 10, 2);
        assert_eq!(c.check(7, s), Repeat::Pending { index: 10, term: 2 });
        // Another request, session, batch or client: new.
        assert_eq!(c.check(7, send(1, 6, 99)), Repeat::New);
        assert_eq!(c.check(7, send(2, 5, 99)), Repeat::New);
        assert_eq!(c.check(7, send(1, 5, 98)), Repeat::New);
        assert_eq!(c.check(8, s), Repeat::New);
        c.applied(9, 2, Some(ack(1)));
        assert_eq!(c.check(7, s), Repeat::Pending { index: 10, term: 2 });
        c.applied(10, 2, Some(ack(3)));
        assert_eq!(c.check(7, s), Repeat::Stored(ack(3)));
        // The client's next send (the same request number, as the SDK
        // numbers them, another batch) replaces it.
        c.proposed(7, send(1, 5, 100), 11, 2);
        assert_eq!(c.check(7, s), Repeat::New);
    }

    #[test]
    fn an_overwritten_send_is_forgotten() {
        let mut c = RepeatTable::default();
        let s = send(1, 5, 99);
        c.proposed(7, s, 10, 2);
        // Index 10 was applied from another leader's term.
        c.applied(10, 3, Some(ack(3)));
        assert_eq!(c.check(7, s), Repeat::New);
        c.proposed(8, s, 11, 3);
        c.applied(11, 3, None);
        assert_eq!(c.check(8, s), Repeat::New, "an apply that stored nothing");
        c.proposed(9, s, 12, 3);
        c.clear_pending();
        assert_eq!(c.check(9, s), Repeat::New);
    }

    /// A stored send stays known while other clients send, up to
    /// `CAPACITY` clients; past it, settled sends are forgotten and pending
    /// ones kept.
    #[test]
    fn settled_sends_are_forgotten_only_past_capacity() {
        let mut c = RepeatTable::default();
        let s = send(1, 5, 99);
        c.proposed(7, s, 1, 2);
        c.applied(1, 2, Some(ack(3)));
        let others = (1..super::CAPACITY as u128).map(|k| 7 + k);
        for (i, client) in others.enumerate() {
            c.proposed(client, send(1, 1, 1), 2 + i as u64, 2);
        }
        assert_eq!(c.last.len(), super::CAPACITY);
        assert_eq!(c.check(7, s), Repeat::Stored(ack(3)), "at capacity");
        c.proposed(1 << 100, send(1, 1, 1), 1 << 40, 2);
        assert_eq!(c.check(7, s), Repeat::New, "past it: settled, forgotten");
        let pending = c.check(8, send(1, 1, 1));
        assert_eq!(pending, Repeat::Pending { index: 2, term: 2 }, "kept");
    }

    #[test]
    fn client_zero_is_never_a_repeat() {
        let mut c = RepeatTable::default();
        c.proposed(0, send(0, 0, 0), 10, 2);
        assert_eq!(c.check(0, send(0, 0, 0)), Repeat::New);
    }
}
