//! Streams → topics → partitions, and the engine partition behind each
//! Iggy partition. Plain data: [`crate::catalog::store`] persists it.
//!
//! A new stream gets the lowest id no stream holds, a new topic the lowest
//! id no topic of its stream holds, as Iggy's server does: a deleted
//! stream's or topic's id is given again. Engine partition ids count from 0
//! over the server's life and are never reused, so a deleted topic's
//! partitions cannot be mistaken for a new topic's; nor are topic `uid`s,
//! which tell a topic from an earlier one that had its ids.

use iggy_binary_protocol::WireIdentifier;
use serde::{Deserialize, Serialize};

/// The whole mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// In a cluster: the last metadata entry applied to this catalog
    /// (entries up to it are not applied again after a restart).
    #[serde(default)]
    pub replica_applied: u64,
    /// In a cluster: the entry that made this catalog what it is; a change
    /// is proposed with the version it was made from, and refused at
    /// apply when the catalog moved since.
    #[serde(default)]
    pub replica_version: u64,
    /// In a cluster: engine partitions a change dropped (sorted). Their ids
    /// are never given again, so a replicated send that reaches a node
    /// after the drop is recognised and not stored.
    #[serde(default)]
    pub deleted_partitions: Vec<u64>,
    /// The engine partition id the next partition gets.
    pub next_partition: u64,
    /// Streams, by id.
    pub streams: Vec<StreamMeta>,
    /// The id the next user gets (the root user is 0 and not stored).
    #[serde(default)]
    pub next_user_id: u32,
    /// The last topic `uid` given (0: none yet).
    #[serde(default)]
    pub last_topic_uid: u64,
    /// Users other than root ([`crate::catalog::accounts`]).
    #[serde(default)]
    pub users: Vec<UserMeta>,
    /// The root user's personal access tokens.
    #[serde(default)]
    pub root_tokens: Vec<TokenMeta>,
}

/// A stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMeta {
    /// Its id.
    pub id: u32,
    /// Its unique name.
    pub name: String,
    /// Creation time, µs since the epoch.
    pub created_at: u64,
    /// Topics, by id.
    pub topics: Vec<TopicMeta>,
    /// The options block the client sent, kept verbatim.
    pub options: Vec<u8>,
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Its id within the stream.
    pub id: u32,
    /// Unique over the server's life (0 for topics made before uids were):
    /// what in-memory state keys a topic by, since its ids may be reused.
    #[serde(default)]
    pub uid: u64,
    /// Its name, unique within the stream.
    pub name: String,
    /// Creation time, µs since the epoch.
    pub created_at: u64,
    /// Engine partition id of each Iggy partition (index = Iggy id).
    pub partitions: Vec<u64>,
    /// The options block the client sent, kept verbatim.
    pub options: Vec<u8>,
    /// Consumer groups, by id (see `catalog_groups.rs`).
    #[serde(default)]
    pub groups: Vec<GroupMeta>,
    /// The id the next group gets: never reused, since a group's stored
    /// offsets are keyed by it.
    #[serde(default)]
    pub next_group_id: u32,
}

/// A stored user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMeta {
    /// Its id (from 1).
    pub id: u32,
    /// Its unique name.
    pub username: String,
    /// argon2 PHC string of its password.
    pub password_hash: String,
    /// [`crate::catalog::accounts::STATUS_ACTIVE`] or
    /// [`crate::catalog::accounts::STATUS_INACTIVE`].
    pub status: u8,
    /// Creation time, µs since the epoch.
    pub created_at: u64,
    /// Its grants; none means it may do nothing but sign in.
    pub permissions: Option<crate::catalog::permissions::Permissions>,
    /// The options block the client sent, kept verbatim.
    pub options: Vec<u8>,
    /// Its personal access tokens.
    pub tokens: Vec<TokenMeta>,
}

/// A personal access token: its name, a lookup key (the first characters of
/// the token, not secret enough to sign in with) and the argon2 hash of the
/// whole token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMeta {
    /// Its name, unique for the user.
    pub name: String,
    /// The token's first [`TOKEN_LOOKUP_LEN`] characters; unique over all
    /// tokens.
    pub lookup: String,
    /// argon2 PHC string of the token.
    pub hash: String,
    /// When it stops working, µs since the epoch; `None`: never.
    pub expiry_at: Option<u64>,
}

/// Characters of a token kept in the clear to find it.
pub const TOKEN_LOOKUP_LEN: usize = 12;

impl TokenMeta {
    /// Whether it has expired at `now` (µs since the epoch).
    pub fn expired(&self, now: u64) -> bool {
        self.expiry_at.is_some_and(|at| at <= now)
    }
}

/// A consumer group of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMeta {
    /// Its id within the topic, never reused.
    pub id: u32,
    /// Its name, unique within the topic.
    pub name: String,
}

/// Why a catalog change is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// No such stream.
    #[error("stream {0} does not exist")]
    NoStream(String),
    /// No such topic.
    #[error("topic {topic} does not exist in stream {stream}")]
    NoTopic {
        /// the stream
        stream: String,
        /// the topic
        topic: String,
    },
    /// The name is taken.
    #[error("a stream named {0} exists")]
    StreamExists(String),
    /// The name is taken in the stream.
    #[error("a topic named {topic} exists in stream {stream}")]
    TopicExists {
        /// the stream
        stream: String,
        /// the topic
        topic: String,
    },
    /// Ids of this kind ran out.
    #[error("no {0} ids left")]
    IdsExhausted(IdKind),
    /// The topic holds as many consumer groups as it may
    /// (`--max-consumer-groups`).
    #[error("topic {topic} holds {max} consumer groups, the most a topic may (delete one, or raise --max-consumer-groups)")]
    TooManyGroups {
        /// the topic
        topic: String,
        /// the limit
        max: usize,
    },
    /// No such consumer group.
    #[error("consumer group {group} does not exist in topic {topic}")]
    NoGroup {
        /// the topic
        topic: String,
        /// the group
        group: String,
    },
    /// The group name is taken in the topic.
    #[error("a consumer group named {group} exists in topic {topic}")]
    GroupExists {
        /// the topic
        topic: String,
        /// the group
        group: String,
    },
}

/// Which ids ran out ([`CatalogError::IdsExhausted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// Stream ids (`u32`, the lowest free one is given).
    Stream,
    /// Topic ids within a stream.
    Topic,
    /// Topic uids, never reused.
    TopicUid,
    /// Engine partition ids, never reused.
    Partition,
    /// Consumer group ids within a topic, never reused.
    ConsumerGroup,
}

impl std::fmt::Display for IdKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdKind::Stream => "stream",
            IdKind::Topic => "topic",
            IdKind::TopicUid => "topic uid",
            IdKind::Partition => "partition",
            IdKind::ConsumerGroup => "consumer group",
        })
    }
}

impl Catalog {
    /// The stream `id` names.
    pub fn stream(&self, id: &WireIdentifier) -> Result<&StreamMeta, CatalogError> {
        let found = match id {
            WireIdentifier::Numeric(n) => self.streams.iter().find(|s| s.id == *n),
            WireIdentifier::String(name) => self.streams.iter().find(|s| s.name == name.as_str()),
        };
        found.ok_or_else(|| CatalogError::NoStream(id.to_string()))
    }

    /// The topic `topic` names in the stream `stream` names.
    pub fn topic(
        &self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
    ) -> Result<(&StreamMeta, &TopicMeta), CatalogError> {
        let s = self.stream(stream)?;
        let found = match topic {
            WireIdentifier::Numeric(n) => s.topics.iter().find(|t| t.id == *n),
            WireIdentifier::String(name) => s.topics.iter().find(|t| t.name == name.as_str()),
        };
        let t = found.ok_or_else(|| CatalogError::NoTopic {
            stream: stream.to_string(),
            topic: topic.to_string(),
        })?;
        Ok((s, t))
    }

    /// Adds a stream; returns its id.
    pub fn add_stream(
        &mut self,
        name: &str,
        options: Vec<u8>,
        now: u64,
    ) -> Result<u32, CatalogError> {
        if self.streams.iter().any(|s| s.name == name) {
            return Err(CatalogError::StreamExists(name.to_owned()));
        }
        let id = lowest_free(self.streams.iter().map(|s| s.id))
            .ok_or(CatalogError::IdsExhausted(IdKind::Stream))?;
        let at = self.streams.partition_point(|s| s.id < id);
        self.streams.insert(
            at,
            StreamMeta {
                id,
                name: name.to_owned(),
                created_at: now,
                topics: Vec::new(),
                options,
            },
        );
        Ok(id)
    }

    /// Reserves `count` engine partition ids.
    pub fn reserve_partitions(&mut self, count: u32) -> Result<Vec<u64>, CatalogError> {
        let first = self.next_partition;
        self.next_partition = first
            .checked_add(u64::from(count))
            .ok_or(CatalogError::IdsExhausted(IdKind::Partition))?;
        Ok((first..self.next_partition).collect())
    }

    /// Adds a topic over already reserved engine partitions; returns its id.
    pub fn add_topic(
        &mut self,
        stream: &WireIdentifier,
        name: &str,
        partitions: Vec<u64>,
        options: Vec<u8>,
        now: u64,
    ) -> Result<(u32, u32), CatalogError> {
        let sid = self.stream(stream)?.id;
        let uid = self
            .last_topic_uid
            .checked_add(1)
            .ok_or(CatalogError::IdsExhausted(IdKind::TopicUid))?;
        let s = self
            .streams
            .iter_mut()
            .find(|s| s.id == sid)
            .ok_or_else(|| CatalogError::NoStream(stream.to_string()))?;
        if s.topics.iter().any(|t| t.name == name) {
            return Err(CatalogError::TopicExists {
                stream: s.name.clone(),
                topic: name.to_owned(),
            });
        }
        let id = lowest_free(s.topics.iter().map(|t| t.id))
            .ok_or(CatalogError::IdsExhausted(IdKind::Topic))?;
        let at = s.topics.partition_point(|t| t.id < id);
        s.topics.insert(
            at,
            TopicMeta {
                id,
                uid,
                name: name.to_owned(),
                created_at: now,
                partitions,
                options,
                groups: Vec::new(),
                next_group_id: 0,
            },
        );
        self.last_topic_uid = uid;
        Ok((sid, id))
    }

    /// Removes a stream; returns the engine partitions it held.
    pub fn remove_stream(&mut self, stream: &WireIdentifier) -> Result<Vec<u64>, CatalogError> {
        let sid = self.stream(stream)?.id;
        let at = self.streams.iter().position(|s| s.id == sid);
        let removed = at.map(|i| self.streams.remove(i));
        self.revoke_grants(sid, None);

        Ok(removed
            .map(|s| s.topics.into_iter().flat_map(|t| t.partitions).collect())
            .unwrap_or_default())
    }

    /// Removes a topic; returns the engine partitions it held.
    pub fn remove_topic(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
    ) -> Result<Vec<u64>, CatalogError> {
        let (s, t) = self.topic(stream, topic)?;
        let (sid, tid) = (s.id, t.id);
        let Some(s) = self.streams.iter_mut().find(|s| s.id == sid) else {
            return Ok(Vec::new());
        };
        let at = s.topics.iter().position(|t| t.id == tid);
        let removed = at.map(|i| s.topics.remove(i).partitions);
        self.revoke_grants(sid, Some(tid));
        Ok(removed.unwrap_or_default())
    }

    /// Drops every user's grants over a deleted stream (`topic` none) or
    /// topic, so a stream or topic that gets its id later does not inherit
    /// them.
    fn revoke_grants(&mut self, stream: u32, topic: Option<u32>) {
        for p in self.users.iter_mut().filter_map(|u| u.permissions.as_mut()) {
            match topic {
                None => p.streams.retain(|g| g.stream_id != stream),
                Some(topic) => {
                    for g in p.streams.iter_mut().filter(|g| g.stream_id == stream) {
                        g.topics.retain(|t| t.topic_id != topic);
                    }
                }
            }
        }
    }

    /// Every engine partition some topic holds.
    pub fn all_partitions(&self) -> impl Iterator<Item = u64> + '_ {
        self.streams
            .iter()
            .flat_map(|s| s.topics.iter().flat_map(|t| t.partitions.iter().copied()))
    }
}

/// The lowest id not among `taken`; none when every `u32` is.
fn lowest_free(taken: impl Iterator<Item = u32>) -> Option<u32> {
    let mut ids: Vec<u32> = taken.collect();
    ids.sort_unstable();
    ids.dedup();
    let mut want = 0u32;
    for id in ids {
        if id != want {
            break;
        }
        want = want.checked_add(1)?;
    }
    Some(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_free_ids_are_given_and_partitions_are_never_reused() {
        let mut c = Catalog::default();
        let s = c.add_stream("orders", Vec::new(), 1).expect("stream");
        assert_eq!(s, 0);
        let named = WireIdentifier::named("orders").expect("name");
        let parts = c.reserve_partitions(3).expect("ids");
        c.add_topic(&named, "t", parts, Vec::new(), 2)
            .expect("topic");
        let (_, t) = c
            .topic(&WireIdentifier::numeric(0), &WireIdentifier::numeric(0))
            .expect("found");
        assert_eq!((t.partitions.clone(), t.uid), (vec![0, 1, 2], 1));
        assert_eq!(c.remove_stream(&named).expect("removed"), vec![0, 1, 2]);
        // The id comes back, the engine partitions and the topic uid do not.
        assert_eq!(c.add_stream("orders", Vec::new(), 3).expect("again"), 0);
        assert_eq!(c.add_stream("b", Vec::new(), 3).expect("b"), 1);
        assert_eq!(c.add_stream("c", Vec::new(), 3).expect("c"), 2);
        c.remove_stream(&WireIdentifier::numeric(1))
            .expect("b gone");
        assert_eq!(c.add_stream("d", Vec::new(), 3).expect("d"), 1);
        let ids: Vec<u32> = c.streams.iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![0, 1, 2], "streams stay in id order");
        let parts = c.reserve_partitions(1).expect("ids");
        assert_eq!(parts, vec![3]);
        for name in ["t", "u"] {
            c.add_topic(&named, name, Vec::new(), Vec::new(), 4)
                .expect("topic");
        }
        c.remove_topic(&named, &WireIdentifier::numeric(0))
            .expect("t gone");
        let again = c.add_topic(&named, "v", parts, Vec::new(), 5).expect("v");
        assert_eq!(again, (0, 0));
        let (_, v) = c.topic(&named, &WireIdentifier::numeric(0)).expect("v");
        assert_eq!((v.name.as_str(), v.uid), ("v", 4));
        assert!(matches!(
            c.add_stream("orders", Vec::new(), 4),
            Err(CatalogError::StreamExists(_))
        ));
    }

    #[test]
    fn grants_over_a_deleted_stream_or_topic_are_dropped() {
        use crate::catalog::permissions::{Permissions, StreamGrant, TopicGrant};
        let mut c = Catalog::default();
        for name in ["a", "b"] {
            c.add_stream(name, Vec::new(), 1).expect("stream");
        }
        let a = WireIdentifier::numeric(0);
        for name in ["x", "y"] {
            c.add_topic(&a, name, Vec::new(), Vec::new(), 1)
                .expect("topic");
        }
        let grant = |stream_id| StreamGrant {
            stream_id,
            read_stream: true,
            topics: vec![0, 1]
                .into_iter()
                .map(|topic_id| TopicGrant {
                    topic_id,
                    read_topic: true,
                    ..TopicGrant::default()
                })
                .collect(),
            ..StreamGrant::default()
        };
        c.users.push(UserMeta {
            id: 1,
            username: "u".into(),
            password_hash: String::new(),
            status: 1,
            created_at: 1,
            permissions: Some(Permissions {
                streams: vec![grant(0), grant(1)],
                ..Permissions::default()
            }),
            options: Vec::new(),
            tokens: Vec::new(),
        });
        c.remove_topic(&a, &WireIdentifier::numeric(0)).expect("x");
        c.remove_stream(&WireIdentifier::numeric(1)).expect("b");
        let p = c.users[0].permissions.as_ref().expect("grants");
        assert_eq!(p.streams.len(), 1, "stream 1's grant is gone");
        let topics: Vec<u32> = p.streams[0].topics.iter().map(|t| t.topic_id).collect();
        assert_eq!(topics, vec![1], "topic 0's grant is gone");
    }
}
