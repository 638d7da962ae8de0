//! Executing decoded requests. Each command answers with an [`Outcome`]:
//! a body, a poll reply to write from the mappings, or an Iggy error.

pub mod authz;
pub(crate) mod change_error;
mod clients;
mod groups;
mod lifecycle;
mod offsets;
mod outcome;
mod partitions;
mod poll;
mod send;
mod session;
mod snapshot;
mod streams;
mod system;
mod tokens;
mod topics;
mod users;

use crate::node::context::Context;
use crate::wire::header::RequestHead;
use crate::wire::request::Request;
use authz::Authorized;
use bytes::Bytes;
use iggy_binary_protocol::EvictionReason;
use iggy_common::IggyError;
use std::sync::Arc;

pub use outcome::Outcome;
pub use session::Session;

/// Runs `request` for the connection in `session`. `payload` is the
/// request's payload (SEND_MESSAGES stores a slice of it).
pub async fn execute(
    ctx: &Arc<Context>,
    session: &mut Session,
    head: &RequestHead,
    request: Request,
    payload: Bytes,
) -> Outcome {
    let signed_in = session.id.is_some();
    match request {
        Request::Ping => return Outcome::empty(),
        Request::Login(login) => return session::login(ctx, session, login).await,
        Request::LegacyLogin { code } => {
            tracing::debug!("legacy login command {code}: evicted as Iggy's server does");
            return Outcome::Evict(EvictionReason::MalformedLogin);
        }
        _ if !signed_in => return Outcome::Error(IggyError::Unauthenticated),
        _ => {}
    }
    // Checked against the catalog the command reads its targets from; each
    // catalog change checks again against the catalog it changes.
    let catalog = ctx.metadata.snapshot();
    if !session::token_lives(&catalog, session, crate::node::context::now_micros()) {
        // Its token was deleted or has expired: the session ends with it,
        // as a sign-out does (memberships included).
        ctx.groups.remove_connection(session.connection);
        session::sign_out(session);
        return Outcome::Error(IggyError::Unauthenticated);
    }
    let need = authz::need_of(session.user, &request);
    let auth = match Authorized::new(catalog, session.user, need) {
        Ok(auth) => auth,
        Err(e) => {
            tracing::debug!("user {} refused command {}: {e}", session.user, head.code);
            return Outcome::Error(crate::wire::status::from_denied(e));
        }
    };
    let a = &auth;
    match request {
        Request::Ping | Request::Login(_) | Request::LegacyLogin { .. } => {
            Outcome::Error(IggyError::InvalidCommand)
        }
        Request::Logout => {
            // Signing out ends its consumer-group memberships.
            ctx.groups.remove_connection(session.connection);
            session::logout(session)
        }
        Request::GetMe => clients::get_me(ctx, session),
        Request::GetClients => clients::get_all(ctx),
        Request::GetClient(r) => clients::get(ctx, r.client_id),
        Request::GetUsers => users::get_all(ctx, a).into(),
        Request::GetUser(r) => users::get(ctx, a, &r.user_id).into(),
        Request::CreateUser(r) => users::create(ctx, a, session.peer, r).await.into(),
        Request::DeleteUser(r) => users::delete(ctx, a, &r.user_id).await.into(),
        Request::UpdateUser(r) => users::update(ctx, a, r).await.into(),
        Request::UpdatePermissions(r) => users::update_permissions(ctx, a, r).await.into(),
        Request::ChangePassword(r) => users::change_password(ctx, a, session, r).await.into(),
        Request::GetTokens => tokens::get_all(a),
        Request::CreateToken(r) => tokens::create(ctx, a, session.peer, r).await.into(),
        Request::DeleteToken(r) => tokens::delete(ctx, a, &r.name).await.into(),
        Request::GetStats => system::stats(ctx).await,
        Request::GetSnapshot(r) => system::snapshot(ctx, r).await.into(),
        Request::DescribeOptions(r) => system::describe_options(ctx, r.scope),
        Request::GetClusterMetadata => system::cluster_metadata(ctx),
        // A send on a node that does not lead is answered only if it
        // repeats one this node took while it led (`send.rs`).
        Request::SendMessages(r) => send::send(ctx, a, session, head, r, payload).await.into(),
        // In a cluster, everything else is served by the node leading
        // every group; elsewhere it is refused before anything is done,
        // and the SDK asks who leads and goes there.
        _ if ctx.replica().is_some_and(|r| !r.leads_all()) => {
            Outcome::Error(IggyError::TransientNotAccepted)
        }
        Request::GetStreams => streams::get_all(ctx, a).await.into(),
        Request::GetStream(r) => streams::get(ctx, a, &r.stream_id).await.into(),
        Request::CreateStream(r) => streams::create(ctx, a, r).await.into(),
        Request::DeleteStream(r) => streams::delete(ctx, a, &r.stream_id).await.into(),
        Request::GetTopic(r) => topics::get(ctx, a, &r.stream_id, &r.topic_id).await.into(),
        Request::GetTopics(r) => topics::get_all(ctx, a, &r.stream_id).await.into(),
        Request::CreateTopic(r) => topics::create(ctx, a, r).await.into(),
        Request::DeleteTopic(r) => topics::delete(ctx, a, &r.stream_id, &r.topic_id)
            .await
            .into(),
        Request::PollMessages(r) => poll::poll(ctx, a, session, head, r).await.into(),
        Request::Flush(r) => send::flush(ctx, a, r).await.into(),
        Request::StoreConsumerOffset(r) => offsets::store(ctx, a, session, r).await.into(),
        Request::GetConsumerOffset(r) => offsets::get(ctx, a, session, r).await.into(),
        Request::DeleteConsumerOffset(r) => offsets::delete(ctx, a, session, r).await.into(),
        Request::UpdateStream(r) => lifecycle::update_stream(ctx, a, r).await.into(),
        Request::PurgeStream(r) => lifecycle::purge(ctx, a, &r.stream_id, None).await.into(),
        Request::UpdateTopic(r) => lifecycle::update_topic(ctx, a, r).await.into(),
        Request::PurgeTopic(r) => lifecycle::purge(ctx, a, &r.stream_id, Some(&r.topic_id))
            .await
            .into(),
        Request::CreatePartitions(r) => lifecycle::create_partitions(ctx, a, r).await.into(),
        Request::DeletePartitions(r) => lifecycle::delete_partitions_of(ctx, a, r).await.into(),
        Request::DeleteSegments(r) => lifecycle::delete_segments(ctx, a, r).await.into(),
        Request::GetConsumerGroup(r) => groups::get(ctx, a, r).await.into(),
        Request::GetConsumerGroups(r) => groups::get_all(ctx, a, r).await.into(),
        Request::CreateConsumerGroup(r) => groups::create(ctx, a, r).await.into(),
        Request::DeleteConsumerGroup(r) => groups::delete(ctx, a, r).await.into(),
        Request::JoinConsumerGroup(r) => groups::join(ctx, a, session, r).await.into(),
        Request::LeaveConsumerGroup(r) => groups::leave(ctx, a, session, r).await.into(),
        Request::SyncConsumerGroup(r) => groups::sync(ctx, a, session, r).await.into(),
        Request::Unsupported { code } => {
            tracing::debug!("unsupported command {code}");
            // A command of Iggy's protocol this server lacks, or no command.
            match iggy_binary_protocol::lookup_command(code) {
                Some(_) => Outcome::Error(IggyError::FeatureUnavailable),
                None => Outcome::Error(IggyError::InvalidCommand),
            }
        }
    }
}
