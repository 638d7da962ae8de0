//! Who is in which consumer group, and which partitions each member owns.
//! Per connection and in memory, on the node the client is connected to:
//! a member is its connection, and leaves when the connection ends or
//! signs out.
//!
//! The partitions of a group are dealt to its members round robin, in the
//! order they joined: partition `p` belongs to member `p % members`. Every
//! change (a join, a leave, a member gone, the topic's partition count
//! changing) deals them again and raises the group's generation, which a
//! member's SYNC reports with its partitions.
//!
//! A member polls a partition it owns under a [`PollLease`]: while one poll of
//! a group's partition runs (reading and, with auto commit, storing the
//! group's offset), no other poll of that partition by that group starts,
//! so two members never read the same messages when ownership moves.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A group, by the ids of its stream, topic and itself, and its topic's
/// uid: a deleted topic's id is given again, its uid is not, so the members
/// of a deleted topic's groups are never taken for a new topic's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// the stream id
    pub stream: u32,
    /// the topic id
    pub topic: u32,
    /// the topic's uid
    pub topic_uid: u64,
    /// the group id
    pub group: u32,
}

#[derive(Debug, Default)]
struct ConsumerGroup {
    /// Connections, in the order they joined.
    members: Vec<u64>,
    /// Where each member's polls without a partition go next.
    cursors: HashMap<u64, usize>,
    generation: u64,
    /// The partition count the assignment was dealt for.
    partitions: u32,
    /// Partitions with a poll running.
    busy: HashSet<u32>,
}

impl ConsumerGroup {
    /// Deals again for `partitions` if the count changed.
    fn follow(&mut self, partitions: u32) {
        if self.partitions != partitions {
            self.partitions = partitions;
            self.generation += 1;
        }
    }

    fn owned_by(&self, member: usize) -> Vec<u32> {
        let n = self.members.len();
        (0..self.partitions)
            .filter(|p| *p as usize % n == member)
            .collect()
    }

    fn position(&self, connection: u64) -> Option<usize> {
        self.members.iter().position(|m| *m == connection)
    }
}

/// What a member's poll may do.
#[derive(Debug)]
pub enum Claim<'a> {
    /// Poll this partition; the lease ends when dropped.
    Granted(PollLease<'a>),
    /// The connection is not a member of the group.
    NotMember,
    /// The partition asked for is not the member's (any more).
    NotOwned,
    /// The member owns no partition (more members than partitions).
    Nothing,
    /// Another poll of this partition by the group is running.
    Busy(u32),
}

/// A running poll of one partition by one group.
#[derive(Debug)]
pub struct PollLease<'a> {
    groups: &'a Memberships,
    key: GroupKey,
    /// The partition (Iggy index) the poll reads.
    pub partition: u32,
}

impl Drop for PollLease<'_> {
    fn drop(&mut self) {
        self.groups.with(|all| {
            if let Some(g) = all.get_mut(&self.key) {
                g.busy.remove(&self.partition);
            }
        });
    }
}

/// Every group's members (of this node's connections).
#[derive(Debug, Default)]
pub struct Memberships {
    groups: Mutex<HashMap<GroupKey, ConsumerGroup>>,
}

impl Memberships {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<GroupKey, ConsumerGroup>) -> T) -> T {
        let mut all = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut all)
    }

    /// Adds `connection` to the group; false when it already is a member.
    pub fn join(&self, key: GroupKey, connection: u64, partitions: u32) -> bool {
        self.with(|all| {
            let g = all.entry(key).or_default();
            g.follow(partitions);
            if g.position(connection).is_some() {
                return false;
            }
            g.members.push(connection);
            g.generation += 1;
            true
        })
    }

    /// Removes `connection` from the group; false when it was no member.
    pub fn leave(&self, key: GroupKey, connection: u64) -> bool {
        self.with(|all| {
            let Some(g) = all.get_mut(&key) else {
                return false;
            };
            let Some(at) = g.position(connection) else {
                return false;
            };
            g.members.remove(at);
            g.cursors.remove(&connection);
            g.generation += 1;
            true
        })
    }

    /// Removes `connection` from every group (it ended or signed out).
    pub fn remove_connection(&self, connection: u64) {
        self.with(|all| {
            for g in all.values_mut() {
                if let Some(at) = g.position(connection) {
                    g.members.remove(at);
                    g.cursors.remove(&connection);
                    g.generation += 1;
                }
            }
            all.retain(|_, g| !g.members.is_empty() || !g.busy.is_empty());
        });
    }

    /// Forgets a deleted group's members.
    pub fn forget(&self, key: GroupKey) {
        self.with(|all| all.remove(&key));
    }

    /// The group's generation and `connection`'s partitions, or `None`
    /// when it is no member.
    pub fn assignment(
        &self,
        key: GroupKey,
        connection: u64,
        partitions: u32,
    ) -> Option<(u64, Vec<u32>)> {
        self.with(|all| {
            let g = all.get_mut(&key)?;
            g.follow(partitions);
            let at = g.position(connection)?;
            Some((g.generation, g.owned_by(at)))
        })
    }

    /// Every member (its connection) with its partitions, in join order.
    pub fn members(&self, key: GroupKey, partitions: u32) -> Vec<(u64, Vec<u32>)> {
        self.with(|all| {
            let Some(g) = all.get_mut(&key) else {
                return Vec::new();
            };
            g.follow(partitions);
            (0..g.members.len())
                .map(|i| (g.members[i], g.owned_by(i)))
                .collect()
        })
    }

    /// Whether `connection` owns `partition` in the group now.
    pub fn owns(&self, key: GroupKey, connection: u64, partitions: u32, partition: u32) -> bool {
        self.assignment(key, connection, partitions)
            .is_some_and(|(_, owned)| owned.contains(&partition))
    }

    /// Takes a partition for a poll by `connection`: `partition`, or with
    /// none the member's next partition, round robin over the ones it owns.
    pub fn claim(
        &self,
        key: GroupKey,
        connection: u64,
        partitions: u32,
        partition: Option<u32>,
    ) -> Claim<'_> {
        self.with(|all| {
            let Some(g) = all.get_mut(&key) else {
                return Claim::NotMember;
            };
            g.follow(partitions);
            let Some(at) = g.position(connection) else {
                return Claim::NotMember;
            };
            let owned = g.owned_by(at);
            let chosen = match partition {
                Some(p) if owned.contains(&p) => p,
                Some(_) => return Claim::NotOwned,
                None if owned.is_empty() => return Claim::Nothing,
                None => {
                    let cursor = g.cursors.entry(connection).or_default();
                    let p = owned[*cursor % owned.len()];
                    *cursor = cursor.wrapping_add(1);
                    p
                }
            };
            if !g.busy.insert(chosen) {
                return Claim::Busy(chosen);
            }
            Claim::Granted(PollLease {
                groups: self,
                key,
                partition: chosen,
            })
        })
    }

    /// The groups `connection` is a member of.
    pub fn groups_of(&self, connection: u64) -> Vec<GroupKey> {
        self.with(|all| {
            all.iter()
                .filter(|(_, g)| g.position(connection).is_some())
                .map(|(k, _)| *k)
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: GroupKey = GroupKey {
        stream: 1,
        topic: 2,
        topic_uid: 4,
        group: 3,
    };

    fn owned(m: &Memberships, c: u64, partitions: u32) -> Vec<u32> {
        m.assignment(KEY, c, partitions)
            .map(|a| a.1)
            .unwrap_or_default()
    }

    #[test]
    fn partitions_are_dealt_round_robin_and_move_on_every_change() {
        let m = Memberships::default();
        assert_eq!(m.assignment(KEY, 10, 5), None, "not a member");
        assert!(m.join(KEY, 10, 5));
        assert!(!m.join(KEY, 10, 5), "a second join changes nothing");
        assert_eq!(m.assignment(KEY, 10, 5), Some((2, vec![0, 1, 2, 3, 4])));
        assert!(m.join(KEY, 11, 5));
        assert_eq!(owned(&m, 10, 5), vec![0, 2, 4]);
        assert_eq!(owned(&m, 11, 5), vec![1, 3]);
        assert!(m.join(KEY, 12, 5));
        assert_eq!(m.assignment(KEY, 12, 5), Some((4, vec![2])));
        // The topic grows: dealt again, a new generation.
        assert_eq!(m.assignment(KEY, 12, 6), Some((5, vec![2, 5])));
        // A member leaves, another's connection ends.
        assert!(m.leave(KEY, 10));
        assert!(!m.leave(KEY, 10));
        assert_eq!(m.assignment(KEY, 11, 6), Some((6, vec![0, 2, 4])));
        m.remove_connection(11);
        assert_eq!(m.assignment(KEY, 12, 6), Some((7, (0..6).collect())));
        assert_eq!(m.members(KEY, 6), vec![(12, (0..6).collect())]);
        assert_eq!(m.groups_of(12), vec![KEY]);
        m.forget(KEY);
        assert_eq!(m.assignment(KEY, 12, 6), None);
    }

    #[test]
    fn a_poll_holds_its_partition_until_it_ends() {
        let m = Memberships::default();
        m.join(KEY, 1, 2);
        let Claim::Granted(lease) = m.claim(KEY, 1, 2, Some(1)) else {
            panic!("owned");
        };
        // Ownership moves while the poll runs: the new owner waits for it.
        m.join(KEY, 2, 2);
        assert!(matches!(m.claim(KEY, 1, 2, Some(1)), Claim::NotOwned));
        assert!(matches!(m.claim(KEY, 2, 2, Some(1)), Claim::Busy(1)));
        drop(lease);
        assert!(matches!(m.claim(KEY, 2, 2, Some(1)), Claim::Granted(_)));
        assert!(matches!(m.claim(KEY, 3, 2, Some(0)), Claim::NotMember));
        // Without a partition: the member's own, in turn.
        m.join(KEY, 3, 4);
        let picks: Vec<u32> = (0..4)
            .map(|_| match m.claim(KEY, 1, 4, None) {
                Claim::Granted(l) => l.partition,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(picks, vec![0, 3, 0, 3]);
        assert!(matches!(m.claim(KEY, 3, 1, None), Claim::Nothing));
    }
}
