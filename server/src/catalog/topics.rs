//! Changes to streams and topics after their creation: renames and new
//! options, fresh partitions for a purge, partitions added and removed,
//! and the retention a topic's options ask for.
//!
//! A purge gives a topic new engine partition ids (from the catalog's
//! counter) rather than emptying the old ones in place: the old ones are
//! then deleted, as any partition no topic holds.

use crate::catalog::model::{Catalog, CatalogError, TopicMeta};
use corelog::Retention;
use iggy_binary_protocol::primitives::user_headers::encode_user_headers;
use iggy_binary_protocol::{WireIdentifier, WireOptions};
use iggy_common::TopicCreateOptions;

/// What a topic's `message_expiry` and `max_topic_size` say, as Iggy
/// reports them (`u64::MAX`: never / unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicLimits {
    /// Microseconds a message is kept, or `u64::MAX`.
    pub message_expiry: u64,
    /// Bytes the topic may hold, or `u64::MAX`.
    pub max_topic_size: u64,
}

impl TopicMeta {
    /// The limits its options set; absent ones are unlimited.
    pub fn limits(&self) -> TopicLimits {
        let options = WireOptions::from_validated(self.options.clone().into());
        let parsed = TopicCreateOptions::parse_committed(&options);
        TopicLimits {
            message_expiry: parsed.message_expiry.map_or(u64::MAX, u64::from),
            max_topic_size: parsed.max_topic_size.map_or(u64::MAX, u64::from),
        }
    }

    /// The engine retention of each of its partitions: messages older than
    /// `message_expiry` go, and the topic's `max_topic_size` is shared
    /// evenly between its partitions (as Iggy enforces it). Whole sealed
    /// segments are deleted, oldest first; the active one never.
    pub fn retention(&self) -> Retention {
        let limits = self.limits();
        let partitions = self.partitions.len().max(1) as u64;
        Retention {
            max_age: (limits.message_expiry != u64::MAX)
                .then(|| std::time::Duration::from_micros(limits.message_expiry)),
            max_bytes: (limits.max_topic_size != u64::MAX)
                .then(|| (limits.max_topic_size / partitions).max(1)),
        }
    }
}

/// `old` with every entry of `new` set over it (same key: `new` wins).
pub fn merge_options(old: &[u8], new: &WireOptions) -> Vec<u8> {
    let old = WireOptions::from_validated(old.to_vec().into());
    let mut entries: Vec<(u8, &[u8], u8, &[u8])> = Vec::new();
    for e in old.iter().chain(new.iter()) {
        let entry = (e.key_kind.0, e.key, e.value_kind.0, e.value);
        match entries.iter_mut().find(|x| x.1 == e.key) {
            Some(x) => *x = entry,
            None => entries.push(entry),
        }
    }
    let mut buf = bytes::BytesMut::new();
    encode_user_headers(&entries, &mut buf);
    buf.to_vec()
}

impl Catalog {
    /// Renames a stream and replaces its options.
    pub fn update_stream(
        &mut self,
        stream: &WireIdentifier,
        name: &str,
        options: Vec<u8>,
    ) -> Result<(), CatalogError> {
        let sid = self.stream(stream)?.id;
        if self.streams.iter().any(|s| s.name == name && s.id != sid) {
            return Err(CatalogError::StreamExists(name.to_owned()));
        }
        if let Some(s) = self.streams.iter_mut().find(|s| s.id == sid) {
            s.name = name.to_owned();
            s.options = options;
        }
        Ok(())
    }

    /// Renames a topic and sets `options` over its options.
    pub fn update_topic(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
        name: &str,
        options: &WireOptions,
    ) -> Result<&TopicMeta, CatalogError> {
        let (s, t) = self.topic(stream, topic)?;
        if s.topics.iter().any(|o| o.name == name && o.id != t.id) {
            return Err(CatalogError::TopicExists {
                stream: s.name.clone(),
                topic: name.to_owned(),
            });
        }
        let t = self.topic_mut(stream, topic)?;
        t.name = name.to_owned();
        t.options = merge_options(&t.options, options);
        Ok(t)
    }

    /// The topics of `stream` (or only `topic`), each with its partition
    /// count: what a purge renews.
    pub fn purge_targets(
        &self,
        stream: &WireIdentifier,
        topic: Option<&WireIdentifier>,
    ) -> Result<Vec<(u32, usize)>, CatalogError> {
        let s = self.stream(stream)?;
        Ok(match topic {
            Some(t) => {
                let (_, t) = self.topic(stream, t)?;
                vec![(t.id, t.partitions.len())]
            }
            None => s
                .topics
                .iter()
                .map(|t| (t.id, t.partitions.len()))
                .collect(),
        })
    }

    /// Gives the topics of `stream` the fresh partitions `fresh` (topic id,
    /// ids; reserved and created beforehand); returns the partitions they
    /// held. A topic whose partition count changed meanwhile keeps its own.
    pub fn renew_partitions(
        &mut self,
        stream: &WireIdentifier,
        fresh: Vec<(u32, Vec<u64>)>,
    ) -> Result<Vec<u64>, CatalogError> {
        let sid = self.stream(stream)?.id;
        let mut old = Vec::new();
        let Some(s) = self.streams.iter_mut().find(|s| s.id == sid) else {
            return Ok(old);
        };
        for (tid, ids) in fresh {
            match s.topics.iter_mut().find(|t| t.id == tid) {
                Some(t) if t.partitions.len() == ids.len() => {
                    old.extend(std::mem::replace(&mut t.partitions, ids));
                }
                // Changed or gone meanwhile: the fresh ones are orphans.
                _ => old.extend(ids),
            }
        }
        Ok(old)
    }

    /// Appends already created partitions to the topic.
    pub fn add_partitions(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
        ids: Vec<u64>,
    ) -> Result<(), CatalogError> {
        self.topic_mut(stream, topic)?.partitions.extend(ids);
        Ok(())
    }

    /// Removes the topic's last `count` partitions (all of them at most);
    /// returns their engine ids.
    pub fn remove_partitions(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
        count: u32,
    ) -> Result<Vec<u64>, CatalogError> {
        let t = self.topic_mut(stream, topic)?;
        let keep = t.partitions.len().saturating_sub(count as usize);
        Ok(t.partitions.split_off(keep))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_common::{IggyDuration, IggyExpiry, MaxTopicSize, TopicUpdateOptions};
    use std::str::FromStr;

    fn topic(options: Vec<u8>, partitions: usize) -> TopicMeta {
        TopicMeta {
            id: 0,
            uid: 0,
            name: "t".into(),
            created_at: 0,
            partitions: (0..partitions as u64).collect(),
            options,
            groups: Vec::new(),
            next_group_id: 0,
        }
    }

    fn options(expiry: Option<&str>, size: Option<u64>) -> WireOptions {
        TopicUpdateOptions {
            message_expiry: expiry
                .map(|e| IggyExpiry::ExpireDuration(IggyDuration::from_str(e).expect("duration"))),
            max_topic_size: size.map(MaxTopicSize::from),
            ..TopicUpdateOptions::default()
        }
        .to_wire()
        .expect("options")
    }

    #[test]
    fn expiry_and_size_become_each_partitions_retention() {
        let none = topic(Vec::new(), 4);
        assert_eq!(none.retention(), Retention::default());
        assert_eq!(none.limits().message_expiry, u64::MAX);
        let both = topic(options(Some("2s"), Some(4000)).as_bytes().to_vec(), 4);
        assert_eq!(
            both.retention(),
            Retention {
                max_age: Some(std::time::Duration::from_secs(2)),
                max_bytes: Some(1000),
            }
        );
        assert_eq!(both.limits().max_topic_size, 4000);
    }

    #[test]
    fn updated_options_set_over_the_old_ones() {
        let old = options(Some("2s"), Some(4000));
        let merged = merge_options(old.as_bytes(), &options(Some("5s"), None));
        let t = topic(merged, 1);
        assert_eq!(t.limits().message_expiry, 5_000_000);
        assert_eq!(t.limits().max_topic_size, 4000, "kept");
    }
}
