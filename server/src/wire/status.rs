//! The one place engine and codec errors become Iggy error statuses.
//!
//! A reply's `status` is an `IggyError` code (`iggy_common`), which the SDK
//! turns back into the typed error. The code cannot carry text, so the
//! server logs the full error where it maps it. Keep every mapping from
//! `corelog` errors here; engine errors are mapped by their
//! [`RequestError::kind`], not by the enums that nest their causes.

use crate::catalog::accounts::{AccountError, MAX_TOKENS_PER_USER, ROOT_USER_ID};
use crate::catalog::model::{CatalogError, IdKind};
use crate::commands::authz::Denied;
use crate::commands::change_error::{AccountUpdate, UpdateError};
use crate::guard::login::log_limit::LogLimit;
use crate::node::changes::StoreError;
use crate::wire::request::DecodeError;
use corelog::{BatchError, ErrorKind, RequestError};
use iggy_binary_protocol::WireIdentifier;
use iggy_common::{Identifier, IggyError};

/// Refused requests are logged at most this often, so that a client
/// sending nothing but bad requests cannot flood the log.
static REFUSALS: LogLimit = LogLimit::new(10);

/// Logs a refused request (rate-limited, saying how many were left out).
pub fn refused(e: &dyn std::fmt::Display) {
    if let Some(left_out) = REFUSALS.allow(std::time::Instant::now()) {
        if left_out > 0 {
            tracing::warn!("{e} ({left_out} refused requests not logged before it)");
        } else {
            tracing::warn!("{e}");
        }
    }
}

/// The status for a refused permission check.
pub fn from_denied(e: Denied) -> IggyError {
    match e {
        Denied::NoUser => IggyError::Unauthenticated,
        Denied::Inactive => IggyError::UserInactive,
        Denied::Unauthorized => IggyError::Unauthorized,
    }
}

/// The status for a failed engine request, by its [`ErrorKind`], logging
/// the error in full.
pub fn from_engine(e: &RequestError) -> IggyError {
    if let Some(error) = e.bad_batch() {
        refused(&format_args!("batch refused: {e}"));
        return from_batch(error);
    }
    match e.kind() {
        ErrorKind::NotFound => {
            refused(e);
            IggyError::PartitionNotFound(
                e.partition()
                    .and_then(|p| usize::try_from(p).ok())
                    .unwrap_or(usize::MAX),
                Default::default(),
                Default::default(),
            )
        }
        ErrorKind::ShuttingDown => {
            tracing::info!("request during shutdown: {e}");
            IggyError::Disconnected
        }
        // Iggy has no code for it: the generic one, the cause in the log.
        ErrorKind::Limit => {
            refused(e);
            IggyError::Error
        }
        _ => {
            tracing::error!("storage: {e}");
            IggyError::CannotAppendMessage
        }
    }
}

/// The status for a failed replicated request: "not accepted" (nothing
/// stored: the SDK asks who leads and retries there), "not committed" (the
/// outcome is unknown: the SDK replays), or what the batch or the store
/// said.
pub fn from_replica(e: &corelog_replica::ReplicaError) -> IggyError {
    use corelog_replica::ReplicaError as R;
    match e {
        R::NotLeader { .. } | R::Conflict => {
            tracing::debug!("not accepted: {e}");
            IggyError::TransientNotAccepted
        }
        R::NotCommitted => {
            tracing::warn!("{e}");
            IggyError::TransientNotCommitted
        }
        R::Admission { error, .. } => {
            refused(&format_args!("batch refused: {e}"));
            from_batch(error)
        }
        R::Stopped => IggyError::Disconnected,
        // Refused on every node alike when the entry is applied.
        R::Store(store) if store.kind() == ErrorKind::Limit => from_engine(store),
        other => {
            tracing::error!("replication: {other}");
            IggyError::CannotAppendMessage
        }
    }
}

/// The status naming what is wrong with a refused batch.
pub fn from_batch(e: &BatchError) -> IggyError {
    match e {
        BatchError::FrameChecksum {
            stored, computed, ..
        } => IggyError::InvalidMessageChecksum(*stored, *computed, 0),
        BatchError::BatchChecksum {
            stored, computed, ..
        } => IggyError::InvalidBatchChecksum(*stored, *computed, 0),
        BatchError::ReservedHeaderByte { value, .. } => {
            IggyError::InvalidReservedField(u64::from(*value))
        }
        BatchError::FrameReserved { value, .. } => IggyError::InvalidReservedField(*value),
        BatchError::Empty | BatchError::CountTooLarge { .. } | BatchError::MissingFrames { .. } => {
            IggyError::InvalidMessagesCount
        }
        BatchError::TooLarge { .. } => IggyError::TooBigMessagePayload,
        BatchError::OffsetDelta { stored, index, .. } => {
            IggyError::NonZeroOffset(u64::from(*stored), *index)
        }
        BatchError::TimestampOverflow { .. } => IggyError::InvalidMessageTimestampDelta(0),
        _ => IggyError::InvalidMessagePayloadLength,
    }
}

/// The status for a payload that is not its command's layout.
pub fn from_decode(e: &DecodeError) -> IggyError {
    refused(&format_args!("bad request: {e}"));
    match e {
        DecodeError::Wire {
            source: iggy_binary_protocol::WireError::UnknownDiscriminant { .. },
            ..
        } => IggyError::InvalidIdentifier,
        _ => IggyError::InvalidFormat,
    }
}

/// The SDK's identifier for a wire identifier (error payloads).
pub(crate) fn identifier(id: &WireIdentifier) -> Identifier {
    match id {
        WireIdentifier::Numeric(n) => Identifier::numeric(*n),
        WireIdentifier::String(s) => Identifier::named(s.as_str()),
    }
    .unwrap_or_default()
}

/// An identifier for a name (error payloads).
fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap_or_default()
}

/// An identifier for a name or number as the catalog reports it (error payloads).
fn parsed(name: &str) -> Identifier {
    Identifier::from_str_value(name).unwrap_or_default()
}

/// The status for a catalog refusal.
pub(crate) fn from_catalog(e: CatalogError, stream: &WireIdentifier) -> IggyError {
    match e {
        CatalogError::NoStream(_) => IggyError::StreamIdNotFound(identifier(stream)),
        // Iggy answers a missing topic TopicIdNotFound (2010) whichever
        // way it is named, and a missing group ConsumerGroupIdNotFound (5000).
        CatalogError::NoTopic { topic, .. } => {
            IggyError::TopicIdNotFound(parsed(&topic), identifier(stream))
        }
        CatalogError::StreamExists(name) => IggyError::StreamNameAlreadyExists(name),
        CatalogError::TopicExists { topic, .. } => {
            IggyError::TopicNameAlreadyExists(topic, identifier(stream))
        }
        CatalogError::NoGroup { topic, group } => {
            IggyError::ConsumerGroupIdNotFound(parsed(&group), parsed(&topic))
        }
        CatalogError::GroupExists { topic, group } => {
            IggyError::ConsumerGroupNameAlreadyExists(group, named(&topic))
        }
        // Iggy has no code for it: the generic one, the cause logged.
        CatalogError::TooManyGroups { .. } => {
            refused(&e);
            IggyError::Error
        }
        CatalogError::IdsExhausted(kind) => match kind {
            IdKind::Stream => IggyError::TooManyStreams,
            IdKind::Topic | IdKind::TopicUid => IggyError::TooManyTopics,
            IdKind::Partition => IggyError::PartitionIdSpaceExhausted,
            IdKind::ConsumerGroup => IggyError::InvalidConsumerGroupId,
        },
    }
}

impl UpdateError {
    pub(crate) fn status(self, stream: &WireIdentifier) -> IggyError {
        match self {
            UpdateError::Denied(e) => from_denied(e),
            UpdateError::Catalog(e) => from_catalog(e, stream),
            UpdateError::Metadata(crate::catalog::store::MetadataError::Replica(e)) => {
                from_replica(&e)
            }
            UpdateError::Metadata(e) => {
                tracing::error!("metadata: {e}");
                IggyError::Error
            }
        }
    }
}

impl AccountUpdate {
    /// The status the client gets.
    pub(crate) fn status(self) -> IggyError {
        match self {
            AccountUpdate::Denied(e) => from_denied(e),
            AccountUpdate::Refused(e) => match e {
                AccountError::NoUser(u) => IggyError::ResourceNotFound(format!("user {u}")),
                AccountError::UserExists(_) => IggyError::UserAlreadyExists,
                AccountError::Root => IggyError::CannotChangePermissions(ROOT_USER_ID),
                AccountError::TokenExists { user, name } => {
                    IggyError::PersonalAccessTokenAlreadyExists(name, user)
                }
                AccountError::NoToken { name, .. } => {
                    IggyError::ResourceNotFound(format!("personal access token {name}"))
                }
                AccountError::TooManyTokens(user) => {
                    IggyError::PersonalAccessTokensLimitReached(user, MAX_TOKENS_PER_USER as u32)
                }
                AccountError::PasswordChanged => IggyError::InvalidCredentials,
                AccountError::LookupTaken => IggyError::Error,
                AccountError::IdsExhausted => IggyError::UsersLimitReached,
            },
            AccountUpdate::Write(e) => {
                tracing::error!("metadata: {e}");
                IggyError::Error
            }
        }
    }
}

impl StoreError {
    /// The Iggy status for it (logged in full where it maps).
    pub fn status(&self) -> IggyError {
        match self {
            StoreError::Engine(e) => from_engine(e),
            StoreError::Replica(e) => from_replica(e),
        }
    }
}

/// The status for a failed purge: a missing topic is named by the
/// request's identifier.
pub(crate) fn from_purge(
    e: UpdateError,
    stream: &WireIdentifier,
    topic: Option<&WireIdentifier>,
) -> IggyError {
    match (e, topic) {
        (UpdateError::Catalog(CatalogError::NoTopic { .. }), Some(t)) => {
            IggyError::TopicIdNotFound(identifier(t), identifier(stream))
        }
        (e, _) => e.status(stream),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_batches_name_their_problem() {
        let checksum = from_batch(&BatchError::FrameChecksum {
            index: 0,
            position: 256,
            stored: 1,
            computed: 2,
        });
        assert_eq!(checksum.as_code(), 4027);
        assert_eq!(from_batch(&BatchError::Empty).as_code(), 4009);
    }
}
