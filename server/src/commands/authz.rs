//! The one permission check: what a decoded request needs ([`need`]) and
//! whether the signed-in user has it ([`authorize`]), against the catalog
//! the command resolves its targets in.
//!
//! The check runs twice, never against a catalog older than the one acted
//! on. At dispatch, against a snapshot that the command then reads from
//! ([`Authorized::catalog`]): a refused request never reaches its command.
//! And inside every catalog change, against the very catalog being changed
//! (`Context::update_catalog` takes the [`Authorized`]), so that a stream
//! or topic created after the dispatch check cannot be changed by a user
//! without the grant on it: a name or a lowest-free id that did not
//! resolve at dispatch may resolve by the time the change runs.
//!
//! [`need`] matches every [`Request`] variant without a catch-all, so a new
//! request does not compile until it says what it needs. As in Iggy's
//! server, a stream or topic that does not resolve passes the check (the
//! command then answers "not found" from the same catalog), the root user
//! passes every check, and a user may read itself and change its own
//! password without `manage_users`.

use crate::catalog::accounts::{ROOT_USER_ID, STATUS_INACTIVE};
use crate::catalog::model::Catalog;
use crate::catalog::permissions::Action;
use crate::wire::request::Request;
use iggy_binary_protocol::WireIdentifier;
use std::sync::Arc;

/// What a request needs beyond being signed in. It owns its identifiers:
/// the check runs again inside the command's catalog change, after the
/// request has been taken apart.
#[derive(Debug, Clone)]
pub enum Need {
    /// Nothing more (self-scoped or harmless requests).
    SignedIn,
    /// A server-wide grant.
    Global(Action),
    /// A grant over a stream.
    Stream(Action, WireIdentifier),
    /// A grant over a topic.
    Topic(Action, WireIdentifier, WireIdentifier),
    /// Nothing when the target is the caller, else the grant.
    SelfOr(Action, WireIdentifier),
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The signed-in user has been deleted since it signed in.
    #[error("the signed-in user no longer exists")]
    NoUser,
    /// The signed-in user has been deactivated since it signed in.
    #[error("the signed-in user is inactive")]
    Inactive,
    /// The user lacks the grant.
    #[error("the user lacks the permission")]
    Unauthorized,
}

/// A request that passed the check at dispatch: who sent it, what it
/// needs, and the catalog it was checked against, which the command reads
/// its targets from. A catalog change checks it again against the catalog
/// it changes ([`Authorized::check`]).
#[derive(Debug)]
pub struct Authorized {
    user: u32,
    need: Need,
    catalog: Arc<Catalog>,
}

impl Authorized {
    /// Checks that `user` may do what `need` says as of `catalog`.
    pub fn new(catalog: Arc<Catalog>, user: u32, need: Need) -> Result<Authorized, Denied> {
        authorize(&catalog, user, &need)?;
        Ok(Authorized {
            user,
            need,
            catalog,
        })
    }

    /// The signed-in user.
    pub fn user(&self) -> u32 {
        self.user
    }

    /// The catalog the request was checked against.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The same check against `catalog`: the one a change is about to
    /// modify.
    pub fn check(&self, catalog: &Catalog) -> Result<(), Denied> {
        authorize(catalog, self.user, &self.need)
    }
}

/// What `request` needs (nothing for the root user, who passes every
/// check: no identifier is copied on its hot path).
pub fn need_of(user: u32, request: &Request) -> Need {
    if user == ROOT_USER_ID {
        Need::SignedIn
    } else {
        need(request)
    }
}

/// What `request` needs.
pub fn need(request: &Request) -> Need {
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
        Request::GetUser(r) => Need::SelfOr(A::ReadUsers, r.user_id.clone()),
        Request::CreateUser(_) | Request::DeleteUser(_) | Request::UpdateUser(_) => {
            Need::Global(A::ManageUsers)
        }
        Request::UpdatePermissions(_) => Need::Global(A::ManageUsers),
        Request::ChangePassword(r) => Need::SelfOr(A::ManageUsers, r.user_id.clone()),
        Request::GetStreams => Need::Global(A::ReadStreams),
        Request::CreateStream(_) => Need::Global(A::CreateStream),
        Request::GetStream(r) => Need::Stream(A::ReadStream, r.stream_id.clone()),
        Request::DeleteStream(r) => Need::Stream(A::ManageStream, r.stream_id.clone()),
        Request::GetTopics(r) => Need::Stream(A::ReadTopics, r.stream_id.clone()),
        Request::CreateTopic(r) => Need::Stream(A::CreateTopic, r.stream_id.clone()),
        Request::GetTopic(r) => Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone()),
        Request::DeleteTopic(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::SendMessages(r) => Need::Topic(A::Send, r.stream_id.clone(), r.topic_id.clone()),
        Request::Flush(r) => Need::Topic(A::Send, r.stream_id.clone(), r.topic_id.clone()),
        Request::PollMessages(r) => Need::Topic(A::Poll, r.stream_id.clone(), r.topic_id.clone()),
        Request::StoreConsumerOffset(r) => {
            Need::Topic(A::Poll, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::GetConsumerOffset(r) => {
            Need::Topic(A::Poll, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::DeleteConsumerOffset(r) => {
            Need::Topic(A::Poll, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::UpdateStream(r) => Need::Stream(A::ManageStream, r.stream_id.clone()),
        Request::PurgeStream(r) => Need::Stream(A::ManageStream, r.stream_id.clone()),
        Request::UpdateTopic(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::PurgeTopic(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::CreatePartitions(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::DeletePartitions(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::DeleteSegments(r) => {
            Need::Topic(A::ManageTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::GetConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::GetConsumerGroups(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::CreateConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::DeleteConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::JoinConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::LeaveConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
        Request::SyncConsumerGroup(r) => {
            Need::Topic(A::ReadTopic, r.stream_id.clone(), r.topic_id.clone())
        }
    }
}

/// Whether `user` may do what `need` says, as of `catalog`.
pub fn authorize(catalog: &Catalog, user: u32, need: &Need) -> Result<(), Denied> {
    if user == ROOT_USER_ID {
        return Ok(());
    }
    // A user deleted or deactivated since it signed in can do nothing more.
    let Some(meta) = catalog.user_by_id(user) else {
        return Err(Denied::NoUser);
    };
    if meta.status == STATUS_INACTIVE {
        return Err(Denied::Inactive);
    }
    let allows = |action, stream, topic| {
        meta.permissions
            .as_ref()
            .is_some_and(|p| p.allows(action, stream, topic))
    };
    let allowed = match need {
        Need::SignedIn => true,
        Need::Global(action) => allows(*action, None, None),
        Need::Stream(action, stream) => match catalog.stream(stream) {
            Ok(s) => allows(*action, Some(s.id), None),
            Err(_) => true,
        },
        Need::Topic(action, stream, topic) => match catalog.topic(stream, topic) {
            Ok((s, t)) => allows(*action, Some(s.id), Some(t.id)),
            Err(_) => true,
        },
        Need::SelfOr(action, target) => {
            let is_self = match target {
                WireIdentifier::Numeric(id) => *id == user,
                WireIdentifier::String(name) => name.as_str() == meta.username,
            };
            is_self || allows(*action, None, None)
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(Denied::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::accounts::{NewUser, STATUS_ACTIVE};
    use crate::catalog::permissions::{Permissions, StreamGrant};

    const USER: u32 = ROOT_USER_ID + 1;

    fn name(s: &str) -> WireIdentifier {
        WireIdentifier::String(iggy_binary_protocol::WireName::new(s).expect("name"))
    }

    /// A catalog with user [`USER`], whose only grant is managing stream `grant`.
    fn with_user(grant: u32) -> Catalog {
        let mut c = Catalog::default();
        let permissions = Permissions {
            streams: vec![StreamGrant {
                stream_id: grant,
                manage_stream: true,
                manage_topics: true,
                ..StreamGrant::default()
            }],
            ..Permissions::default()
        };
        let new = NewUser {
            username: "nobody".into(),
            password_hash: String::new(),
            status: STATUS_ACTIVE,
            permissions: Some(permissions),
            options: Vec::new(),
            created_at: 0,
        };
        assert_eq!(c.add_user(new, "iggy").expect("user"), USER);
        c
    }

    #[test]
    fn a_target_created_after_the_dispatch_check_is_refused_by_the_change() {
        let before = with_user(99);
        // At dispatch nothing named "s" or numbered 0 exists: both pass
        // (the command would answer "not found").
        let by_name = Need::Stream(Action::ManageStream, name("s"));
        let by_id = Need::Topic(
            Action::ManageTopic,
            WireIdentifier::Numeric(0),
            WireIdentifier::Numeric(0),
        );
        let checked_name =
            Authorized::new(Arc::new(before.clone()), USER, by_name).expect("passes");
        let checked_id = Authorized::new(Arc::new(before.clone()), USER, by_id).expect("passes");
        // Root creates them before the change runs.
        let mut after = before;
        let s = after.add_stream("s", Vec::new(), 0).expect("stream");
        assert_eq!(s, 0);
        let p = after.reserve_partitions(1).expect("ids");
        after
            .add_topic(&name("s"), "t", p, Vec::new(), 0)
            .expect("topic");
        // The change's check, against the catalog it changes, refuses both.
        assert_eq!(checked_name.check(&after), Err(Denied::Unauthorized));
        assert_eq!(checked_id.check(&after), Err(Denied::Unauthorized));
    }

    #[test]
    fn the_change_passes_what_the_grant_covers_and_refuses_a_deleted_or_inactive_user() {
        let mut c = with_user(0);
        c.add_stream("s", Vec::new(), 0).expect("stream");
        let need = Need::Stream(Action::ManageStream, WireIdentifier::Numeric(0));
        let a = Authorized::new(Arc::new(c.clone()), USER, need).expect("granted");
        assert_eq!(a.check(&c), Ok(()));
        let mut inactive = c.clone();
        inactive
            .update_user(USER, None, Some(STATUS_INACTIVE), "iggy")
            .expect("deactivate");
        assert_eq!(a.check(&inactive), Err(Denied::Inactive));
        let mut gone = c;
        gone.remove_user(USER).expect("delete");
        assert_eq!(a.check(&gone), Err(Denied::NoUser));
        // The root user passes every check, whatever the catalog holds.
        let root = Authorized::new(
            Arc::new(Catalog::default()),
            ROOT_USER_ID,
            Need::Global(Action::ManageUsers),
        )
        .expect("root");
        assert_eq!(root.check(&gone), Ok(()));
    }

    /// A user may read itself and change its own password without
    /// `manage_users`, named by id or by name; another user, named either
    /// way, needs the grant.
    #[test]
    fn only_the_user_itself_passes_a_self_scoped_check_without_the_grant() {
        let mut c = with_user(0);
        let other = NewUser {
            username: "other".into(),
            password_hash: String::new(),
            status: STATUS_ACTIVE,
            permissions: None,
            options: Vec::new(),
            created_at: 0,
        };
        let other_id = c.add_user(other, "iggy").expect("user");
        let c = Arc::new(c);
        for action in [Action::ReadUsers, Action::ManageUsers] {
            for (target, allowed) in [
                (WireIdentifier::Numeric(USER), true),
                (name("nobody"), true),
                (WireIdentifier::Numeric(other_id), false),
                (name("other"), false),
            ] {
                let need = Need::SelfOr(action, target.clone());
                let got = Authorized::new(c.clone(), USER, need).map(|_| ());
                let want = if allowed {
                    Ok(())
                } else {
                    Err(Denied::Unauthorized)
                };
                assert_eq!(got, want, "{action:?} on {target:?}");
            }
        }
    }
}
