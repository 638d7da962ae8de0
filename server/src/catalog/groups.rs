//! Consumer-group definitions in the [`Catalog`]: a name and an id per
//! group, per topic. Who is a member is not here: membership is per
//! connection, in memory (`membership.rs`).

use crate::catalog::model::{Catalog, CatalogError, GroupMeta, IdKind, TopicMeta};
use iggy_binary_protocol::WireIdentifier;

impl TopicMeta {
    /// The group `id` names, if any.
    pub fn group(&self, id: &WireIdentifier) -> Option<&GroupMeta> {
        match id {
            WireIdentifier::Numeric(n) => self.groups.iter().find(|g| g.id == *n),
            WireIdentifier::String(name) => self.groups.iter().find(|g| g.name == name.as_str()),
        }
    }
}

impl Catalog {
    /// The topic, for a change.
    pub fn topic_mut(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
    ) -> Result<&mut TopicMeta, CatalogError> {
        let (s, t) = self.topic(stream, topic)?;
        let (sid, tid) = (s.id, t.id);
        self.streams
            .iter_mut()
            .find(|s| s.id == sid)
            .and_then(|s| s.topics.iter_mut().find(|t| t.id == tid))
            .ok_or_else(|| CatalogError::NoTopic {
                stream: stream.to_string(),
                topic: topic.to_string(),
            })
    }

    /// Adds a group named `name` to the topic, which may hold at most
    /// `max` groups; returns it.
    pub fn add_group(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
        name: &str,
        max: usize,
    ) -> Result<GroupMeta, CatalogError> {
        let t = self.topic_mut(stream, topic)?;
        if t.groups.iter().any(|g| g.name == name) {
            return Err(CatalogError::GroupExists {
                topic: t.name.clone(),
                group: name.to_owned(),
            });
        }
        if t.groups.len() >= max {
            return Err(CatalogError::TooManyGroups {
                topic: t.name.clone(),
                max,
            });
        }
        let id = t.next_group_id;
        t.next_group_id = id
            .checked_add(1)
            .ok_or(CatalogError::IdsExhausted(IdKind::ConsumerGroup))?;
        let group = GroupMeta {
            id,
            name: name.to_owned(),
        };
        t.groups.push(group.clone());
        Ok(group)
    }

    /// Removes the group `group` names; returns it.
    pub fn remove_group(
        &mut self,
        stream: &WireIdentifier,
        topic: &WireIdentifier,
        group: &WireIdentifier,
    ) -> Result<GroupMeta, CatalogError> {
        let t = self.topic_mut(stream, topic)?;
        let id = t
            .group(group)
            .map(|g| g.id)
            .ok_or_else(|| CatalogError::NoGroup {
                topic: t.name.clone(),
                group: group.to_string(),
            })?;
        let at = t.groups.iter().position(|g| g.id == id);
        at.map(|i| t.groups.remove(i))
            .ok_or_else(|| CatalogError::NoGroup {
                topic: topic.to_string(),
                group: group.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_are_never_reused_and_names_are_unique_per_topic() {
        let mut c = Catalog::default();
        c.add_stream("s", Vec::new(), 1).expect("stream");
        let s = WireIdentifier::numeric(0);
        c.add_topic(&s, "t", vec![], Vec::new(), 1).expect("topic");
        c.add_topic(&s, "u", vec![], Vec::new(), 1).expect("topic");
        let t = WireIdentifier::numeric(0);
        assert_eq!(c.add_group(&s, &t, "g", 8).expect("group").id, 0);
        assert!(matches!(
            c.add_group(&s, &t, "g", 8),
            Err(CatalogError::GroupExists { .. })
        ));
        // Another topic may use the name.
        let u = WireIdentifier::numeric(1);
        assert_eq!(c.add_group(&s, &u, "g", 8).expect("group").id, 0);
        let named = WireIdentifier::named("g").expect("name");
        assert_eq!(c.remove_group(&s, &t, &named).expect("removed").id, 0);
        assert!(matches!(
            c.remove_group(&s, &t, &named),
            Err(CatalogError::NoGroup { .. })
        ));
        assert_eq!(c.add_group(&s, &t, "g", 8).expect("again").id, 1);
        let (_, topic) = c.topic(&s, &t).expect("topic");
        assert_eq!(
            topic
                .group(&WireIdentifier::numeric(1))
                .map(|g| g.name.as_str()),
            Some("g")
        );
        assert!(topic.group(&WireIdentifier::numeric(0)).is_none());
    }

    #[test]
    fn a_topic_holds_at_most_max_groups() {
        let mut c = Catalog::default();
        let s = WireIdentifier::numeric(0);
        let t = WireIdentifier::numeric(0);
        c.add_stream("s", Vec::new(), 1).expect("stream");
        c.add_topic(&s, "t", vec![], Vec::new(), 1).expect("topic");
        c.add_group(&s, &t, "a", 2).expect("first");
        c.add_group(&s, &t, "b", 2).expect("second");
        let refused = c.add_group(&s, &t, "c", 2);
        assert!(
            matches!(refused, Err(CatalogError::TooManyGroups { max: 2, .. })),
            "{refused:?}"
        );
        let (_, topic) = c.topic(&s, &t).expect("topic");
        assert_eq!(topic.groups.len(), 2, "nothing added");
        let a = WireIdentifier::named("a").expect("name");
        c.remove_group(&s, &t, &a).expect("removed");
        c.add_group(&s, &t, "c", 2).expect("room after a delete");
    }
}
