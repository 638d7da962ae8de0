//! Iggy's permission model: global, per-stream and per-topic grants, and
//! the rules that say which grants allow an action. The rules follow Iggy's
//! server (`metadata::permissioner`) at the pinned commit: a broader grant
//! implies the narrower ones (`manage_streams` → `read_streams` →
//! `read_topics` → `poll_messages`; `manage_streams` → `manage_topics` →
//! `send_messages`). The root user is not checked here: it may do anything.

use iggy_binary_protocol::primitives::permissions::{
    WireGlobalPermissions, WirePermissions, WireStreamPermissions, WireTopicPermissions,
};
use serde::{Deserialize, Serialize};

/// A user's grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    /// Over every stream, and the server.
    pub global: Global,
    /// Over single streams (and their topics), by stream id.
    pub streams: Vec<StreamGrant>,
}

/// Grants over the whole server.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Global {
    /// Change server settings.
    pub manage_servers: bool,
    /// Read stats and clients.
    pub read_servers: bool,
    /// Create, change and delete users.
    pub manage_users: bool,
    /// Read users.
    pub read_users: bool,
    /// Create, change and delete every stream.
    pub manage_streams: bool,
    /// Read every stream.
    pub read_streams: bool,
    /// Create, change and delete every topic.
    pub manage_topics: bool,
    /// Read every topic.
    pub read_topics: bool,
    /// Poll from every topic.
    pub poll_messages: bool,
    /// Send to every topic.
    pub send_messages: bool,
}

/// Grants over one stream.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamGrant {
    /// The stream's id.
    pub stream_id: u32,
    /// Change and delete the stream.
    pub manage_stream: bool,
    /// Read the stream.
    pub read_stream: bool,
    /// Create, change and delete its topics.
    pub manage_topics: bool,
    /// Read its topics.
    pub read_topics: bool,
    /// Poll from its topics.
    pub poll_messages: bool,
    /// Send to its topics.
    pub send_messages: bool,
    /// Grants over single topics of the stream.
    pub topics: Vec<TopicGrant>,
}

/// Grants over one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicGrant {
    /// The topic's id within its stream.
    pub topic_id: u32,
    /// Change and delete the topic.
    pub manage_topic: bool,
    /// Read the topic.
    pub read_topic: bool,
    /// Poll from it.
    pub poll_messages: bool,
    /// Send to it.
    pub send_messages: bool,
}

/// What a request does, as far as permissions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Stats, clients (`read_servers`).
    ReadServers,
    /// GET_USER(S) of another user.
    ReadUsers,
    /// Create, change, delete users, their permissions and passwords.
    ManageUsers,
    /// GET_STREAMS.
    ReadStreams,
    /// CREATE_STREAM.
    CreateStream,
    /// GET_STREAM.
    ReadStream,
    /// UPDATE/DELETE/PURGE_STREAM.
    ManageStream,
    /// GET_TOPICS.
    ReadTopics,
    /// CREATE_TOPIC.
    CreateTopic,
    /// GET_TOPIC and the consumer-group commands.
    ReadTopic,
    /// UPDATE/DELETE/PURGE_TOPIC, partitions, segments.
    ManageTopic,
    /// POLL_MESSAGES and consumer offsets.
    Poll,
    /// SEND_MESSAGES and FLUSH.
    Send,
}

impl Permissions {
    /// Whether these grants allow `action` on `stream`/`topic` (ids; `None`
    /// where the action has no such scope).
    pub fn allows(&self, action: Action, stream: Option<u32>, topic: Option<u32>) -> bool {
        let g = &self.global;
        let s = stream.and_then(|id| self.streams.iter().find(|s| s.stream_id == id));
        let t = s.and_then(|s| topic.and_then(|id| s.topics.iter().find(|t| t.topic_id == id)));
        let stream_has = |f: fn(&StreamGrant) -> bool| s.is_some_and(f);
        let topic_has = |f: fn(&TopicGrant) -> bool| t.is_some_and(f);
        match action {
            Action::ReadServers => g.manage_servers || g.read_servers,
            Action::ReadUsers => g.manage_users || g.read_users,
            Action::ManageUsers => g.manage_users,
            Action::ReadStreams => g.manage_streams || g.read_streams,
            Action::CreateStream => g.manage_streams,
            Action::ReadStream => {
                g.manage_streams
                    || g.read_streams
                    || stream_has(|s| s.manage_stream || s.read_stream)
            }
            Action::ManageStream => g.manage_streams || stream_has(|s| s.manage_stream),
            Action::ReadTopics => {
                g.read_streams
                    || g.manage_streams
                    || g.manage_topics
                    || g.read_topics
                    || stream_has(reads_topics)
            }
            Action::CreateTopic => {
                g.manage_streams
                    || g.manage_topics
                    || stream_has(|s| s.manage_stream || s.manage_topics)
            }
            Action::ReadTopic => {
                g.read_streams
                    || g.manage_streams
                    || g.manage_topics
                    || g.read_topics
                    || stream_has(reads_topics)
                    || topic_has(|t| t.manage_topic || t.read_topic)
            }
            Action::ManageTopic => {
                g.manage_streams
                    || g.manage_topics
                    || stream_has(|s| s.manage_stream || s.manage_topics)
                    || topic_has(|t| t.manage_topic)
            }
            Action::Poll => {
                g.poll_messages
                    || g.read_topics
                    || g.manage_topics
                    || g.read_streams
                    || g.manage_streams
                    || stream_has(|s| reads_topics(s) || s.poll_messages)
                    || topic_has(|t| t.manage_topic || t.read_topic || t.poll_messages)
            }
            Action::Send => {
                g.send_messages
                    || g.manage_streams
                    || g.manage_topics
                    || stream_has(|s| s.manage_stream || s.manage_topics || s.send_messages)
                    || topic_has(|t| t.manage_topic || t.send_messages)
            }
        }
    }

    /// Every grant: what the root user has.
    pub fn all() -> Permissions {
        Permissions {
            global: Global {
                manage_servers: true,
                read_servers: true,
                manage_users: true,
                read_users: true,
                manage_streams: true,
                read_streams: true,
                manage_topics: true,
                read_topics: true,
                poll_messages: true,
                send_messages: true,
            },
            streams: Vec::new(),
        }
    }
}

fn reads_topics(s: &StreamGrant) -> bool {
    s.manage_stream || s.read_stream || s.manage_topics || s.read_topics
}

impl From<&WirePermissions> for Permissions {
    fn from(w: &WirePermissions) -> Permissions {
        let g = &w.global;
        Permissions {
            global: Global {
                manage_servers: g.manage_servers,
                read_servers: g.read_servers,
                manage_users: g.manage_users,
                read_users: g.read_users,
                manage_streams: g.manage_streams,
                read_streams: g.read_streams,
                manage_topics: g.manage_topics,
                read_topics: g.read_topics,
                poll_messages: g.poll_messages,
                send_messages: g.send_messages,
            },
            streams: w.streams.iter().map(stream_from_wire).collect(),
        }
    }
}

fn stream_from_wire(s: &WireStreamPermissions) -> StreamGrant {
    StreamGrant {
        stream_id: s.stream_id,
        manage_stream: s.manage_stream,
        read_stream: s.read_stream,
        manage_topics: s.manage_topics,
        read_topics: s.read_topics,
        poll_messages: s.poll_messages,
        send_messages: s.send_messages,
        topics: s
            .topics
            .iter()
            .map(|t| TopicGrant {
                topic_id: t.topic_id,
                manage_topic: t.manage_topic,
                read_topic: t.read_topic,
                poll_messages: t.poll_messages,
                send_messages: t.send_messages,
            })
            .collect(),
    }
}

impl From<&Permissions> for WirePermissions {
    fn from(p: &Permissions) -> WirePermissions {
        let g = &p.global;
        WirePermissions {
            global: WireGlobalPermissions {
                manage_servers: g.manage_servers,
                read_servers: g.read_servers,
                manage_users: g.manage_users,
                read_users: g.read_users,
                manage_streams: g.manage_streams,
                read_streams: g.read_streams,
                manage_topics: g.manage_topics,
                read_topics: g.read_topics,
                poll_messages: g.poll_messages,
                send_messages: g.send_messages,
            },
            streams: p
                .streams
                .iter()
                .map(|s| WireStreamPermissions {
                    stream_id: s.stream_id,
                    manage_stream: s.manage_stream,
                    read_stream: s.read_stream,
                    manage_topics: s.manage_topics,
                    read_topics: s.read_topics,
                    poll_messages: s.poll_messages,
                    send_messages: s.send_messages,
                    topics: s
                        .topics
                        .iter()
                        .map(|t| WireTopicPermissions {
                            topic_id: t.topic_id,
                            manage_topic: t.manage_topic,
                            read_topic: t.read_topic,
                            poll_messages: t.poll_messages,
                            send_messages: t.send_messages,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_topic(topic: TopicGrant) -> Permissions {
        Permissions {
            global: Global::default(),
            streams: vec![StreamGrant {
                stream_id: 1,
                topics: vec![topic],
                ..StreamGrant::default()
            }],
        }
    }

    #[test]
    fn a_topic_grant_covers_that_topic_only() {
        let p = on_topic(TopicGrant {
            topic_id: 2,
            send_messages: true,
            ..TopicGrant::default()
        });
        assert!(p.allows(Action::Send, Some(1), Some(2)));
        assert!(!p.allows(Action::Send, Some(1), Some(3)));
        assert!(!p.allows(Action::Send, Some(0), Some(2)));
        assert!(!p.allows(Action::Poll, Some(1), Some(2)));
        assert!(!p.allows(Action::ManageTopic, Some(1), Some(2)));
    }

    #[test]
    fn broader_grants_imply_narrower_ones() {
        let global = |g: Global| Permissions {
            global: g,
            streams: Vec::new(),
        };
        let read_streams = global(Global {
            read_streams: true,
            ..Global::default()
        });
        assert!(read_streams.allows(Action::Poll, Some(5), Some(0)));
        assert!(read_streams.allows(Action::ReadTopic, Some(5), Some(0)));
        assert!(!read_streams.allows(Action::Send, Some(5), Some(0)));
        assert!(!read_streams.allows(Action::ManageStream, Some(5), None));
        let manage_topics = global(Global {
            manage_topics: true,
            ..Global::default()
        });
        assert!(manage_topics.allows(Action::Send, Some(5), Some(0)));
        assert!(manage_topics.allows(Action::ManageTopic, Some(5), Some(0)));
        assert!(!manage_topics.allows(Action::CreateStream, None, None));
        assert!(!Permissions::default().allows(Action::ReadStreams, None, None));
        assert!(Permissions::all().allows(Action::ManageUsers, None, None));
    }

    #[test]
    fn wire_round_trip() {
        let p = on_topic(TopicGrant {
            topic_id: 9,
            read_topic: true,
            ..TopicGrant::default()
        });
        assert_eq!(Permissions::from(&WirePermissions::from(&p)), p);
    }

    /// Every action, with the stream and topic a request for it names in
    /// the table below: none (server-wide), stream 1, or topic 2 of it.
    const ACTIONS: [(Action, Option<u32>, Option<u32>); 13] = [
        (Action::ReadServers, None, None),
        (Action::ReadUsers, None, None),
        (Action::ManageUsers, None, None),
        (Action::ReadStreams, None, None),
        (Action::CreateStream, None, None),
        (Action::ReadStream, Some(1), None),
        (Action::ManageStream, Some(1), None),
        (Action::ReadTopics, Some(1), None),
        (Action::CreateTopic, Some(1), None),
        (Action::ReadTopic, Some(1), Some(2)),
        (Action::ManageTopic, Some(1), Some(2)),
        (Action::Poll, Some(1), Some(2)),
        (Action::Send, Some(1), Some(2)),
    ];

    /// A grant's name, how to set it, and the actions it alone allows.
    type Row<G> = (&'static str, fn(&mut G), Vec<Action>);

    fn allowed(p: &Permissions) -> Vec<Action> {
        ACTIONS
            .iter()
            .filter(|(a, s, t)| p.allows(*a, *s, *t))
            .map(|(a, _, _)| *a)
            .collect()
    }

    /// Each single grant allows exactly what Iggy's permissioner lets it
    /// (`core/metadata/src/permissioner/permissioner_rules`: a broader
    /// grant implies the narrower ones, as its "inheritance" comments
    /// say), and a grant on another stream or topic allows nothing there.
    #[test]
    fn each_grant_allows_what_iggys_permissioner_does() {
        use Action::*;
        let global: [Row<Global>; 10] = [
            (
                "manage_servers",
                |g| g.manage_servers = true,
                vec![ReadServers],
            ),
            ("read_servers", |g| g.read_servers = true, vec![ReadServers]),
            (
                "manage_users",
                |g| g.manage_users = true,
                vec![ReadUsers, ManageUsers],
            ),
            ("read_users", |g| g.read_users = true, vec![ReadUsers]),
            (
                "manage_streams",
                |g| g.manage_streams = true,
                vec![
                    ReadStreams,
                    CreateStream,
                    ReadStream,
                    ManageStream,
                    ReadTopics,
                    CreateTopic,
                    ReadTopic,
                    ManageTopic,
                    Poll,
                    Send,
                ],
            ),
            (
                "read_streams",
                |g| g.read_streams = true,
                vec![ReadStreams, ReadStream, ReadTopics, ReadTopic, Poll],
            ),
            (
                "manage_topics",
                |g| g.manage_topics = true,
                vec![ReadTopics, CreateTopic, ReadTopic, ManageTopic, Poll, Send],
            ),
            (
                "read_topics",
                |g| g.read_topics = true,
                vec![ReadTopics, ReadTopic, Poll],
            ),
            ("poll_messages", |g| g.poll_messages = true, vec![Poll]),
            ("send_messages", |g| g.send_messages = true, vec![Send]),
        ];
        for (name, grant, want) in global {
            let mut p = Permissions::default();
            grant(&mut p.global);
            assert_eq!(allowed(&p), want, "global {name}");
        }
        let stream: [Row<StreamGrant>; 6] = [
            (
                "manage_stream",
                |s| s.manage_stream = true,
                vec![
                    ReadStream,
                    ManageStream,
                    ReadTopics,
                    CreateTopic,
                    ReadTopic,
                    ManageTopic,
                    Poll,
                    Send,
                ],
            ),
            (
                "read_stream",
                |s| s.read_stream = true,
                vec![ReadStream, ReadTopics, ReadTopic, Poll],
            ),
            (
                "manage_topics",
                |s| s.manage_topics = true,
                vec![ReadTopics, CreateTopic, ReadTopic, ManageTopic, Poll, Send],
            ),
            (
                "read_topics",
                |s| s.read_topics = true,
                vec![ReadTopics, ReadTopic, Poll],
            ),
            ("poll_messages", |s| s.poll_messages = true, vec![Poll]),
            ("send_messages", |s| s.send_messages = true, vec![Send]),
        ];
        for (name, grant, want) in stream {
            for (id, want) in [(1, want), (7, Vec::new())] {
                let mut g = StreamGrant {
                    stream_id: id,
                    ..StreamGrant::default()
                };
                grant(&mut g);
                let p = Permissions {
                    global: Global::default(),
                    streams: vec![g],
                };
                assert_eq!(allowed(&p), want, "stream {id}'s {name}");
            }
        }
        let topic: [Row<TopicGrant>; 4] = [
            (
                "manage_topic",
                |t| t.manage_topic = true,
                vec![ReadTopic, ManageTopic, Poll, Send],
            ),
            ("read_topic", |t| t.read_topic = true, vec![ReadTopic, Poll]),
            ("poll_messages", |t| t.poll_messages = true, vec![Poll]),
            ("send_messages", |t| t.send_messages = true, vec![Send]),
        ];
        for (name, grant, want) in topic {
            for (id, want) in [(2, want), (9, Vec::new())] {
                let mut t = TopicGrant {
                    topic_id: id,
                    ..TopicGrant::default()
                };
                grant(&mut t);
                assert_eq!(allowed(&on_topic(t)), want, "topic {id}'s {name}");
            }
        }
        assert!(allowed(&Permissions::default()).is_empty());
        assert_eq!(allowed(&Permissions::all()).len(), ACTIONS.len());
    }
}
