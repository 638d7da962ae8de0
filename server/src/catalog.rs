//! Streams → topics → partitions, and the engine partition behind each
//! Iggy partition. Plain data: [`crate::metadata`] persists it.
//!
//! Stream ids count from 0 over the server's life, topic ids from 0 within
//! their stream, and engine partition ids from 0 over the server's life:
//! none is ever reused, so a deleted topic's partitions cannot be mistaken
//! for a new topic's.

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
    /// The id the next stream gets.
    pub next_stream_id: u32,
    /// The engine partition id the next partition gets.
    pub next_partition: u64,
    /// Streams, by id.
    pub streams: Vec<StreamMeta>,
    /// The id the next user gets (the root user is 0 and not stored).
    #[serde(default)]
    pub next_user_id: u32,
    /// Users other than root ([`crate::accounts`]).
    #[serde(default)]
    pub users: Vec<crate::accounts::UserMeta>,
    /// The root user's personal access tokens.
    #[serde(default)]
    pub root_tokens: Vec<crate::accounts::TokenMeta>,
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
    /// The id the next topic gets.
    pub next_topic_id: u32,
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
    pub groups: Vec<crate::catalog_groups::GroupMeta>,
    /// The id the next group gets: never reused, since a group's stored
    /// offsets are keyed by it.
    #[serde(default)]
    pub next_group_id: u32,
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
    /// Ids ran out.
    #[error("no {0} ids left")]
    IdsExhausted(&'static str),
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
        let id = self.next_stream_id;
        self.next_stream_id = id
            .checked_add(1)
            .ok_or(CatalogError::IdsExhausted("stream"))?;
        self.streams.push(StreamMeta {
            id,
            name: name.to_owned(),
            created_at: now,
            next_topic_id: 0,
            topics: Vec::new(),
            options,
        });
        Ok(id)
    }

    /// Reserves `count` engine partition ids.
    pub fn reserve_partitions(&mut self, count: u32) -> Result<Vec<u64>, CatalogError> {
        let first = self.next_partition;
        self.next_partition = first
            .checked_add(u64::from(count))
            .ok_or(CatalogError::IdsExhausted("partition"))?;
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
        let id = s.next_topic_id;
        s.next_topic_id = id
            .checked_add(1)
            .ok_or(CatalogError::IdsExhausted("topic"))?;
        s.topics.push(TopicMeta {
            id,
            name: name.to_owned(),
            created_at: now,
            partitions,
            options,
            groups: Vec::new(),
            next_group_id: 0,
        });
        Ok((sid, id))
    }

    /// Removes a stream; returns the engine partitions it held.
    pub fn remove_stream(&mut self, stream: &WireIdentifier) -> Result<Vec<u64>, CatalogError> {
        let sid = self.stream(stream)?.id;
        let at = self.streams.iter().position(|s| s.id == sid);
        let removed = at.map(|i| self.streams.remove(i));
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
        Ok(at
            .map(|i| s.topics.remove(i).partitions)
            .unwrap_or_default())
    }

    /// Every engine partition some topic holds.
    pub fn all_partitions(&self) -> impl Iterator<Item = u64> + '_ {
        self.streams
            .iter()
            .flat_map(|s| s.topics.iter().flat_map(|t| t.partitions.iter().copied()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_and_names_are_looked_up() {
        let mut c = Catalog::default();
        let s = c.add_stream("orders", Vec::new(), 1).expect("stream");
        assert_eq!(s, 0);
        let named = WireIdentifier::named("orders").expect("name");
        let parts = c.reserve_partitions(3).expect("ids");
        c.add_topic(&named, "t", parts, Vec::new(), 2)
            .expect("topic");
        assert_eq!(
            c.topic(&WireIdentifier::numeric(0), &WireIdentifier::numeric(0))
                .expect("found")
                .1
                .partitions,
            vec![0, 1, 2]
        );
        assert_eq!(c.remove_stream(&named).expect("removed"), vec![0, 1, 2]);
        assert_eq!(c.add_stream("orders", Vec::new(), 3).expect("again"), 1);
        assert_eq!(c.reserve_partitions(1).expect("ids"), vec![3]);
        assert!(matches!(
            c.add_stream("orders", Vec::new(), 4),
            Err(CatalogError::StreamExists(_))
        ));
    }
}
