//! Executing decoded requests. Each command answers with an [`Outcome`]:
//! a body, a poll reply to write from the mappings, or an Iggy error.

mod offsets;
mod poll;
mod send;
mod session;
mod streams;
mod system;
mod topics;

use crate::catalog::CatalogError;
use crate::context::Context;
use crate::metadata::MetadataError;
use crate::wire::header::RequestHead;
use crate::wire::iovec::WireVec;
use crate::wire::request::Request;
use bytes::Bytes;
use iggy_binary_protocol::codec::WireEncode;
use iggy_binary_protocol::WireIdentifier;
use iggy_common::{Identifier, IggyError};
use std::sync::Arc;

/// A connection's sign-in state.
#[derive(Debug, Default)]
pub struct Session {
    /// The session number once signed in.
    pub id: Option<u64>,
}

/// A command's answer.
#[derive(Debug)]
pub enum Outcome {
    /// Status 0 and this body.
    Body(Bytes),
    /// A poll reply, written with one vectored write.
    Poll(WireVec),
    /// An error status and an empty body.
    Error(IggyError),
}

impl Outcome {
    fn encoded(value: &impl WireEncode) -> Outcome {
        Outcome::Body(value.to_bytes())
    }

    fn empty() -> Outcome {
        Outcome::Body(Bytes::new())
    }
}

impl From<Result<Outcome, IggyError>> for Outcome {
    fn from(r: Result<Outcome, IggyError>) -> Outcome {
        r.unwrap_or_else(Outcome::Error)
    }
}

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
        Request::Ping => Outcome::empty(),
        Request::Login { username, password } => {
            session::login(ctx, session, username, password).await
        }
        _ if !signed_in => Outcome::Error(IggyError::Unauthenticated),
        Request::Logout => session::logout(session),
        Request::GetStats => system::stats(ctx),
        Request::GetClusterMetadata => system::cluster_metadata(ctx),
        // In a cluster, everything else is served by the node leading
        // every group; elsewhere it is refused before anything is done,
        // and the SDK asks who leads and goes there.
        _ if ctx.replica().is_some_and(|r| !r.leads_all()) => {
            Outcome::Error(IggyError::TransientNotAccepted)
        }
        Request::GetStreams => streams::get_all(ctx).await.into(),
        Request::GetStream(r) => streams::get(ctx, &r.stream_id).await.into(),
        Request::CreateStream(r) => streams::create(ctx, r).await.into(),
        Request::DeleteStream(r) => streams::delete(ctx, &r.stream_id).await.into(),
        Request::GetTopic(r) => topics::get(ctx, &r.stream_id, &r.topic_id).await.into(),
        Request::GetTopics(r) => topics::get_all(ctx, &r.stream_id).await.into(),
        Request::CreateTopic(r) => topics::create(ctx, r).await.into(),
        Request::DeleteTopic(r) => topics::delete(ctx, &r.stream_id, &r.topic_id).await.into(),
        Request::SendMessages(r) => send::send(ctx, r, payload).await.into(),
        Request::PollMessages(r) => poll::poll(ctx, head, r).await.into(),
        Request::Flush(r) => send::flush(ctx, r).await.into(),
        Request::StoreConsumerOffset(r) => offsets::store(ctx, r).await.into(),
        Request::GetConsumerOffset(r) => offsets::get(ctx, r).await.into(),
        Request::Unsupported { code } => {
            tracing::debug!("unsupported command {code}");
            Outcome::Error(IggyError::FeatureUnavailable)
        }
    }
}

/// The SDK's identifier for a wire identifier (error payloads).
fn identifier(id: &WireIdentifier) -> Identifier {
    match id {
        WireIdentifier::Numeric(n) => Identifier::numeric(*n),
        WireIdentifier::String(s) => Identifier::named(s.as_str()),
    }
    .unwrap_or_default()
}

/// The status for a catalog refusal.
fn from_catalog(e: CatalogError, stream: &WireIdentifier) -> IggyError {
    match e {
        CatalogError::NoStream(_) => IggyError::StreamIdNotFound(identifier(stream)),
        CatalogError::NoTopic { topic, .. } => {
            IggyError::TopicNameNotFound(topic, stream.to_string())
        }
        CatalogError::StreamExists(name) => IggyError::StreamNameAlreadyExists(name),
        CatalogError::TopicExists { topic, .. } => {
            IggyError::TopicNameAlreadyExists(topic, identifier(stream))
        }
        CatalogError::IdsExhausted("topic") => IggyError::TooManyTopics,
        CatalogError::IdsExhausted("partition") => IggyError::PartitionIdSpaceExhausted,
        CatalogError::IdsExhausted(_) => IggyError::TooManyStreams,
    }
}

/// A catalog change's failure: a refusal or a failed write.
#[derive(Debug)]
enum UpdateError {
    Catalog(CatalogError),
    Metadata(MetadataError),
}

impl From<MetadataError> for UpdateError {
    fn from(e: MetadataError) -> UpdateError {
        UpdateError::Metadata(e)
    }
}

impl From<CatalogError> for UpdateError {
    fn from(e: CatalogError) -> UpdateError {
        UpdateError::Catalog(e)
    }
}

impl UpdateError {
    fn status(self, stream: &WireIdentifier) -> IggyError {
        match self {
            UpdateError::Catalog(e) => from_catalog(e, stream),
            UpdateError::Metadata(crate::metadata::MetadataError::Replica(e)) => {
                crate::status::from_replica(&e)
            }
            UpdateError::Metadata(e) => {
                tracing::error!("metadata: {e}");
                IggyError::Error
            }
        }
    }
}
