//! The one permission check, run at dispatch before any command: what a
//! decoded request needs ([`need`]) and whether the signed-in user has it
//! ([`authorize`]). A refused request changes nothing: it never reaches its
//! command.
//!
//! [`need`] matches every [`Request`] variant without a catch-all, so a new
//! request does not compile until it says what it needs. As in Iggy's
//! server, a stream or topic that does not resolve passes the check (the
//! command then answers "not found"), the root user passes every check, and
//! a user may read itself and change its own password without
//! `manage_users`.

use crate::accounts::{ROOT_USER_ID, STATUS_INACTIVE};
use crate::catalog::Catalog;
use crate::permissions::Action;
use crate::wire::request::Request;
use iggy_binary_protocol::WireIdentifier;
use iggy_common::IggyError;

/// What a request needs beyond being signed in.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// Nothing more (self-scoped or harmless requests).
    SignedIn,
    /// A server-wide grant.
    Global(Action),
    /// A grant over a stream.
    Stream(Action, &'a WireIdentifier),
    /// A grant over a topic.
    Topic(Action, &'a WireIdentifier, &'a WireIdentifier),
    /// Nothing when the target is the caller, else the grant.
    SelfOr(Action, &'a WireIdentifier),
}

/// What `request` needs.
pub fn need(request: &Request) -> Need<'_> {
    use Action as A;
    match request {
        Request::Ping
        | Request::Login(_)
        | Request::LegacyLogin { .. }
        | Request::DescribeOptions(_)
        | Request::Logout
        | Request::GetMe
        | Request::GetClusterMetadata
        | Request::GetTokens
        | Request::CreateToken(_)
        | Request::DeleteToken(_) => Need::SignedIn,
        // Not implemented, but refused as Iggy refuses it to a user without
        // the grant (the reply is `FeatureUnavailable` otherwise).
        Request::Unsupported { .. } => Need::SignedIn,
        Request::GetStats
        | Request::GetSnapshot(_)
        | Request::GetClients
        | Request::GetClient(_) => Need::Global(A::ReadServers),
        Request::GetUsers => Need::Global(A::ReadUsers),
        Request::GetUser(r) => Need::SelfOr(A::ReadUsers, &r.user_id),
        Request::CreateUser(_) | Request::DeleteUser(_) | Request::UpdateUser(_) => {
            Need::Global(A::ManageUsers)
        }
        Request::UpdatePermissions(_) => Need::Global(A::ManageUsers),
        Request::ChangePassword(r) => Need::SelfOr(A::ManageUsers, &r.user_id),
        Request::GetStreams => Need::Global(A::ReadStreams),
        Request::CreateStream(_) => Need::Global(A::CreateStream),
        Request::GetStream(r) => Need::Stream(A::ReadStream, &r.stream_id),
        Request::DeleteStream(r) => Need::Stream(A::ManageStream, &r.stream_id),
        Request::GetTopics(r) => Need::Stream(A::ReadTopics, &r.stream_id),
        Request::CreateTopic(r) => Need::Stream(A::CreateTopic, &r.stream_id),
        Request::GetTopic(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::DeleteTopic(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::SendMessages(r) => Need::Topic(A::Send, &r.stream_id, &r.topic_id),
        Request::Flush(r) => Need::Topic(A::Send, &r.stream_id, &r.topic_id),
        Request::PollMessages(r) => Need::Topic(A::Poll, &r.stream_id, &r.topic_id),
        Request::StoreConsumerOffset(r) => Need::Topic(A::Poll, &r.stream_id, &r.topic_id),
        Request::GetConsumerOffset(r) => Need::Topic(A::Poll, &r.stream_id, &r.topic_id),
        Request::DeleteConsumerOffset(r) => Need::Topic(A::Poll, &r.stream_id, &r.topic_id),
        Request::UpdateStream(r) => Need::Stream(A::ManageStream, &r.stream_id),
        Request::PurgeStream(r) => Need::Stream(A::ManageStream, &r.stream_id),
        Request::UpdateTopic(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::PurgeTopic(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::CreatePartitions(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::DeletePartitions(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::DeleteSegments(r) => Need::Topic(A::ManageTopic, &r.stream_id, &r.topic_id),
        Request::GetConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::GetConsumerGroups(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::CreateConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::DeleteConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::JoinConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::LeaveConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
        Request::SyncConsumerGroup(r) => Need::Topic(A::ReadTopic, &r.stream_id, &r.topic_id),
    }
}

/// Whether `user` may do what `need` says, as of `catalog`.
pub fn authorize(catalog: &Catalog, user: u32, need: Need<'_>) -> Result<(), IggyError> {
    if user == ROOT_USER_ID {
        return Ok(());
    }
    // A user deleted or deactivated since it signed in can do nothing more.
    let Some(meta) = catalog.user_by_id(user) else {
        return Err(IggyError::Unauthenticated);
    };
    if meta.status == STATUS_INACTIVE {
        return Err(IggyError::UserInactive);
    }
    let allows = |action, stream, topic| {
        meta.permissions
            .as_ref()
            .is_some_and(|p| p.allows(action, stream, topic))
    };
    let allowed = match need {
        Need::SignedIn => true,
        Need::Global(action) => allows(action, None, None),
        Need::Stream(action, stream) => match catalog.stream(stream) {
            Ok(s) => allows(action, Some(s.id), None),
            Err(_) => true,
        },
        Need::Topic(action, stream, topic) => match catalog.topic(stream, topic) {
            Ok((s, t)) => allows(action, Some(s.id), Some(t.id)),
            Err(_) => true,
        },
        Need::SelfOr(action, target) => {
            let is_self = match target {
                WireIdentifier::Numeric(id) => *id == user,
                WireIdentifier::String(name) => name.as_str() == meta.username,
            };
            is_self || allows(action, None, None)
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(IggyError::Unauthorized)
    }
}
