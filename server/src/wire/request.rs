//! Request payloads: command code and bytes in, a typed [`Request`] or a
//! [`DecodeError`] out, with the protocol crate's codecs. A pure function
//! (no I/O, no state), so the fuzz target drives it directly.

use iggy_binary_protocol::codec::{read_u32_le, WireDecode};
use iggy_binary_protocol::codes::{
    CHANGE_PASSWORD_CODE, CREATE_CONSUMER_GROUP_CODE, CREATE_PARTITIONS_CODE,
    CREATE_PERSONAL_ACCESS_TOKEN_CODE, CREATE_STREAM_CODE, CREATE_TOPIC_CODE, CREATE_USER_CODE,
    DELETE_CONSUMER_GROUP_CODE, DELETE_CONSUMER_OFFSET_CODE, DELETE_PARTITIONS_CODE,
    DELETE_PERSONAL_ACCESS_TOKEN_CODE, DELETE_SEGMENTS_CODE, DELETE_STREAM_CODE, DELETE_TOPIC_CODE,
    DELETE_USER_CODE, DESCRIBE_OPTIONS_CODE, FLUSH_UNSAVED_BUFFER_CODE, GET_CLIENTS_CODE,
    GET_CLIENT_CODE, GET_CLUSTER_METADATA_CODE, GET_CONSUMER_GROUPS_CODE, GET_CONSUMER_GROUP_CODE,
    GET_CONSUMER_OFFSET_CODE, GET_ME_CODE, GET_PERSONAL_ACCESS_TOKENS_CODE, GET_SNAPSHOT_FILE_CODE,
    GET_STATS_CODE, GET_STREAMS_CODE, GET_STREAM_CODE, GET_TOPICS_CODE, GET_TOPIC_CODE,
    GET_USERS_CODE, GET_USER_CODE, JOIN_CONSUMER_GROUP_CODE, LEAVE_CONSUMER_GROUP_CODE,
    LOGIN_REGISTER_CODE, LOGIN_REGISTER_WITH_PAT_CODE, LOGIN_USER_CODE,
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE, LOGOUT_USER_CODE, PING_CODE, POLL_MESSAGES_CODE,
    PURGE_STREAM_CODE, PURGE_TOPIC_CODE, SEND_MESSAGES_CODE, STORE_CONSUMER_OFFSET_CODE,
    SYNC_CONSUMER_GROUP_CODE, UPDATE_PERMISSIONS_CODE, UPDATE_STREAM_CODE, UPDATE_TOPIC_CODE,
    UPDATE_USER_CODE,
};
use iggy_binary_protocol::requests::consumer_groups::{
    CreateConsumerGroupRequest, DeleteConsumerGroupRequest, GetConsumerGroupRequest,
    GetConsumerGroupsRequest, JoinConsumerGroupRequest, LeaveConsumerGroupRequest,
    SyncConsumerGroupRequest,
};
use iggy_binary_protocol::requests::consumer_offsets::{
    DeleteConsumerOffsetRequest, GetConsumerOffsetRequest, StoreConsumerOffsetRequest,
};
use iggy_binary_protocol::requests::messages::{
    FlushUnsavedBufferRequest, PollMessagesRequest, SendMessagesHeader,
};
use iggy_binary_protocol::requests::partitions::{
    CreatePartitionsRequest, DeletePartitionsRequest,
};
use iggy_binary_protocol::requests::personal_access_tokens::{
    CreatePersonalAccessTokenRequest, DeletePersonalAccessTokenRequest,
};
use iggy_binary_protocol::requests::segments::DeleteSegmentsRequest;
use iggy_binary_protocol::requests::streams::{
    CreateStreamRequest, DeleteStreamRequest, GetStreamRequest, PurgeStreamRequest,
    UpdateStreamRequest,
};
use iggy_binary_protocol::requests::system::{
    DescribeOptionsRequest, GetClientRequest, GetSnapshotRequest,
};
use iggy_binary_protocol::requests::topics::{
    CreateTopicRequest, DeleteTopicRequest, GetTopicRequest, GetTopicsRequest, PurgeTopicRequest,
    UpdateTopicRequest,
};
use iggy_binary_protocol::requests::users::{
    ChangePasswordRequest, CreateUserRequest, DeleteUserRequest, GetUserRequest,
    LoginRegisterRequest, LoginRegisterWithPatRequest, UpdatePermissionsRequest, UpdateUserRequest,
};
use iggy_binary_protocol::version::{is_protocol_compatible, ClientVersionInfo};
use iggy_binary_protocol::{WireError, WireIdentifier, WirePartitioning};
use secrecy::ExposeSecret;

/// A decoded request.
#[derive(Debug)]
#[non_exhaustive]
pub enum Request {
    /// PING.
    Ping,
    /// GET_STATS.
    GetStats,
    /// GET_SNAPSHOT_FILE: a zip of diagnostics (`snapshot.rs`).
    GetSnapshot(GetSnapshotRequest),
    /// DESCRIBE_OPTIONS: the option keys of topics, streams or users.
    DescribeOptions(DescribeOptionsRequest),
    /// GET_CLUSTER_METADATA.
    GetClusterMetadata,
    /// LOGIN_REGISTER, with a password or a personal access token: sign in,
    /// open a session.
    Login(Login),
    /// The legacy LOGIN_USER or LOGIN_WITH_PERSONAL_ACCESS_TOKEN: refused
    /// with a `MalformedLogin` eviction, as Iggy's server does.
    LegacyLogin {
        /// its code
        code: u32,
    },
    /// LOGOUT_USER.
    Logout,
    /// GET_ME: the caller's connection.
    GetMe,
    /// GET_CLIENT.
    GetClient(GetClientRequest),
    /// GET_CLIENTS.
    GetClients,
    /// GET_USER.
    GetUser(GetUserRequest),
    /// GET_USERS.
    GetUsers,
    /// CREATE_USER.
    CreateUser(CreateUserRequest),
    /// DELETE_USER.
    DeleteUser(DeleteUserRequest),
    /// UPDATE_USER.
    UpdateUser(UpdateUserRequest),
    /// UPDATE_PERMISSIONS.
    UpdatePermissions(UpdatePermissionsRequest),
    /// CHANGE_PASSWORD.
    ChangePassword(ChangePasswordRequest),
    /// GET_PERSONAL_ACCESS_TOKENS: the caller's.
    GetTokens,
    /// CREATE_PERSONAL_ACCESS_TOKEN: for the caller.
    CreateToken(CreatePersonalAccessTokenRequest),
    /// DELETE_PERSONAL_ACCESS_TOKEN: the caller's.
    DeleteToken(DeletePersonalAccessTokenRequest),
    /// GET_STREAMS.
    GetStreams,
    /// GET_STREAM.
    GetStream(GetStreamRequest),
    /// CREATE_STREAM.
    CreateStream(CreateStreamRequest),
    /// DELETE_STREAM.
    DeleteStream(DeleteStreamRequest),
    /// GET_TOPIC.
    GetTopic(GetTopicRequest),
    /// GET_TOPICS.
    GetTopics(GetTopicsRequest),
    /// CREATE_TOPIC.
    CreateTopic(CreateTopicRequest),
    /// DELETE_TOPIC.
    DeleteTopic(DeleteTopicRequest),
    /// SEND_MESSAGES: where to, and where the batch starts in the payload.
    SendMessages(SendMessages),
    /// POLL_MESSAGES.
    PollMessages(PollMessagesRequest),
    /// FLUSH_UNSAVED_BUFFER: make a partition durable.
    Flush(FlushUnsavedBufferRequest),
    /// STORE_CONSUMER_OFFSET.
    StoreConsumerOffset(StoreConsumerOffsetRequest),
    /// GET_CONSUMER_OFFSET.
    GetConsumerOffset(GetConsumerOffsetRequest),
    /// DELETE_CONSUMER_OFFSET.
    DeleteConsumerOffset(DeleteConsumerOffsetRequest),
    /// UPDATE_STREAM.
    UpdateStream(UpdateStreamRequest),
    /// PURGE_STREAM.
    PurgeStream(PurgeStreamRequest),
    /// UPDATE_TOPIC.
    UpdateTopic(UpdateTopicRequest),
    /// PURGE_TOPIC.
    PurgeTopic(PurgeTopicRequest),
    /// CREATE_PARTITIONS.
    CreatePartitions(CreatePartitionsRequest),
    /// DELETE_PARTITIONS.
    DeletePartitions(DeletePartitionsRequest),
    /// DELETE_SEGMENTS.
    DeleteSegments(DeleteSegmentsRequest),
    /// GET_CONSUMER_GROUP.
    GetConsumerGroup(GetConsumerGroupRequest),
    /// GET_CONSUMER_GROUPS.
    GetConsumerGroups(GetConsumerGroupsRequest),
    /// CREATE_CONSUMER_GROUP.
    CreateConsumerGroup(CreateConsumerGroupRequest),
    /// DELETE_CONSUMER_GROUP.
    DeleteConsumerGroup(DeleteConsumerGroupRequest),
    /// JOIN_CONSUMER_GROUP.
    JoinConsumerGroup(JoinConsumerGroupRequest),
    /// LEAVE_CONSUMER_GROUP.
    LeaveConsumerGroup(LeaveConsumerGroupRequest),
    /// SYNC_CONSUMER_GROUP: the member's partitions and the generation.
    SyncConsumerGroup(SyncConsumerGroupRequest),
    /// A command this server does not implement.
    Unsupported {
        /// its code
        code: u32,
    },
}

/// What a sign-in carries: a username and password, a personal access
/// token, or (a body both shapes decode) both to try in that order, as
/// Iggy's server does.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// username and password
    pub credentials: Option<(String, String)>,
    /// a personal access token
    pub token: Option<String>,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("username", &self.credentials.as_ref().map(|c| &c.0))
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The routing part of a SEND_MESSAGES payload; the batch is the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMessages {
    /// the stream
    pub stream_id: WireIdentifier,
    /// the topic
    pub topic_id: WireIdentifier,
    /// how to pick the partition
    pub partitioning: WirePartitioning,
    /// messages the producer says the batch holds
    pub messages_count: u32,
    /// offset of the batch (256-byte header, then frames) in the payload
    pub batch_at: usize,
}

/// A payload that is not the command's layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The protocol codec refused it.
    #[error("command {code}: {source}")]
    Wire {
        /// the command
        code: u32,
        /// the codec's error
        source: WireError,
    },
    /// Bytes follow the command's fields.
    #[error("command {code}: {extra} bytes follow the request")]
    Trailing {
        /// the command
        code: u32,
        /// how many
        extra: usize,
    },
    /// SEND_MESSAGES: the metadata length prefix disagrees with its fields.
    #[error("send_messages: metadata_length is {declared} but its fields take {decoded} bytes of {available}")]
    MetadataLength {
        /// the prefix
        declared: u32,
        /// what the fields took
        decoded: usize,
        /// bytes after the prefix
        available: usize,
    },
    /// LOGIN_REGISTER: the client's protocol version is outside the window
    /// this server accepts.
    #[error("login: protocol version {version:#x} is outside the accepted window")]
    IncompatibleProtocol {
        /// the client's packed version
        version: u32,
    },
}

/// Decodes the payload of command `code`.
pub fn decode_request(code: u32, payload: &[u8]) -> Result<Request, DecodeError> {
    Ok(match code {
        PING_CODE => Request::Ping,
        GET_STATS_CODE => Request::GetStats,
        DESCRIBE_OPTIONS_CODE => Request::DescribeOptions(exact(code, payload)?),
        GET_SNAPSHOT_FILE_CODE => Request::GetSnapshot(exact(code, payload)?),
        GET_CLUSTER_METADATA_CODE => Request::GetClusterMetadata,
        LOGOUT_USER_CODE => Request::Logout,
        GET_STREAMS_CODE => Request::GetStreams,
        LOGIN_REGISTER_CODE | LOGIN_REGISTER_WITH_PAT_CODE => {
            Request::Login(login_register(code, payload)?)
        }
        LOGIN_USER_CODE | LOGIN_WITH_PERSONAL_ACCESS_TOKEN_CODE => Request::LegacyLogin { code },
        GET_ME_CODE => Request::GetMe,
        GET_CLIENTS_CODE => Request::GetClients,
        GET_USERS_CODE => Request::GetUsers,
        GET_PERSONAL_ACCESS_TOKENS_CODE => Request::GetTokens,
        GET_CLIENT_CODE => Request::GetClient(exact(code, payload)?),
        GET_USER_CODE => Request::GetUser(exact(code, payload)?),
        CREATE_USER_CODE => Request::CreateUser(exact(code, payload)?),
        DELETE_USER_CODE => Request::DeleteUser(exact(code, payload)?),
        UPDATE_USER_CODE => Request::UpdateUser(exact(code, payload)?),
        UPDATE_PERMISSIONS_CODE => Request::UpdatePermissions(exact(code, payload)?),
        CHANGE_PASSWORD_CODE => Request::ChangePassword(exact(code, payload)?),
        CREATE_PERSONAL_ACCESS_TOKEN_CODE => Request::CreateToken(exact(code, payload)?),
        DELETE_PERSONAL_ACCESS_TOKEN_CODE => Request::DeleteToken(exact(code, payload)?),
        GET_STREAM_CODE => Request::GetStream(exact(code, payload)?),
        CREATE_STREAM_CODE => Request::CreateStream(exact(code, payload)?),
        DELETE_STREAM_CODE => Request::DeleteStream(exact(code, payload)?),
        GET_TOPIC_CODE => Request::GetTopic(exact(code, payload)?),
        GET_TOPICS_CODE => Request::GetTopics(exact(code, payload)?),
        CREATE_TOPIC_CODE => Request::CreateTopic(exact(code, payload)?),
        DELETE_TOPIC_CODE => Request::DeleteTopic(exact(code, payload)?),
        POLL_MESSAGES_CODE => Request::PollMessages(exact(code, payload)?),
        FLUSH_UNSAVED_BUFFER_CODE => Request::Flush(exact(code, payload)?),
        STORE_CONSUMER_OFFSET_CODE => Request::StoreConsumerOffset(exact(code, payload)?),
        GET_CONSUMER_OFFSET_CODE => Request::GetConsumerOffset(exact(code, payload)?),
        DELETE_CONSUMER_OFFSET_CODE => Request::DeleteConsumerOffset(exact(code, payload)?),
        UPDATE_STREAM_CODE => Request::UpdateStream(exact(code, payload)?),
        PURGE_STREAM_CODE => Request::PurgeStream(exact(code, payload)?),
        UPDATE_TOPIC_CODE => Request::UpdateTopic(exact(code, payload)?),
        PURGE_TOPIC_CODE => Request::PurgeTopic(exact(code, payload)?),
        CREATE_PARTITIONS_CODE => Request::CreatePartitions(exact(code, payload)?),
        DELETE_PARTITIONS_CODE => Request::DeletePartitions(exact(code, payload)?),
        DELETE_SEGMENTS_CODE => Request::DeleteSegments(exact(code, payload)?),
        GET_CONSUMER_GROUP_CODE => Request::GetConsumerGroup(exact(code, payload)?),
        GET_CONSUMER_GROUPS_CODE => Request::GetConsumerGroups(exact(code, payload)?),
        CREATE_CONSUMER_GROUP_CODE => Request::CreateConsumerGroup(exact(code, payload)?),
        DELETE_CONSUMER_GROUP_CODE => Request::DeleteConsumerGroup(exact(code, payload)?),
        JOIN_CONSUMER_GROUP_CODE => Request::JoinConsumerGroup(exact(code, payload)?),
        LEAVE_CONSUMER_GROUP_CODE => Request::LeaveConsumerGroup(exact(code, payload)?),
        SYNC_CONSUMER_GROUP_CODE => Request::SyncConsumerGroup(exact(code, payload)?),
        SEND_MESSAGES_CODE => Request::SendMessages(send_messages(payload)?),
        code => Request::Unsupported { code },
    })
}

/// Decodes `T` from the whole payload.
fn exact<T: WireDecode>(code: u32, payload: &[u8]) -> Result<T, DecodeError> {
    let (value, used) = T::decode(payload).map_err(|source| DecodeError::Wire { code, source })?;
    if used != payload.len() {
        return Err(DecodeError::Trailing {
            code,
            extra: payload.len().saturating_sub(used),
        });
    }
    Ok(value)
}

/// `[ClientVersionInfo]` then a password body or a token body (both run to
/// the end of the payload); whichever decodes exactly. The version is
/// checked first, as Iggy's server does, before anything else is read.
fn login_register(code: u32, payload: &[u8]) -> Result<Login, DecodeError> {
    let (version, prefix) =
        ClientVersionInfo::decode(payload).map_err(|source| DecodeError::Wire { code, source })?;
    if !is_protocol_compatible(version.protocol_version) {
        return Err(DecodeError::IncompatibleProtocol {
            version: version.protocol_version,
        });
    }
    let tail = payload.get(prefix..).unwrap_or(&[]);
    let credentials = match LoginRegisterRequest::decode_after_prefix(version.clone(), tail) {
        Ok((r, used)) if used == tail.len() => Some((
            r.username.as_str().to_owned(),
            r.password.expose_secret().to_owned(),
        )),
        _ => None,
    };
    let token = match LoginRegisterWithPatRequest::decode_after_prefix(version, tail) {
        Ok((r, used)) if used == tail.len() => Some(r.token.expose_secret().to_owned()),
        _ => None,
    };
    if credentials.is_none() && token.is_none() {
        // Neither shape: say what the password shape found wrong.
        let source = LoginRegisterRequest::decode(payload)
            .err()
            .unwrap_or(WireError::Validation(
                "trailing bytes after the login".into(),
            ));
        return Err(DecodeError::Wire { code, source });
    }
    Ok(Login { credentials, token })
}

/// `[metadata_length u32][stream][topic][partitioning][messages_count u32][batch]`.
fn send_messages(payload: &[u8]) -> Result<SendMessages, DecodeError> {
    let wire = |source| DecodeError::Wire {
        code: SEND_MESSAGES_CODE,
        source,
    };
    let declared = read_u32_le(payload, 0).map_err(wire)?;
    let rest = payload.get(4..).unwrap_or(&[]);
    let metadata = rest
        .get(..declared as usize)
        .ok_or(DecodeError::MetadataLength {
            declared,
            decoded: 0,
            available: rest.len(),
        })?;
    let (header, used) = SendMessagesHeader::decode(metadata).map_err(wire)?;
    if used != metadata.len() {
        return Err(DecodeError::MetadataLength {
            declared,
            decoded: used,
            available: rest.len(),
        });
    }
    Ok(SendMessages {
        stream_id: header.stream_id,
        topic_id: header.topic_id,
        partitioning: header.partitioning,
        messages_count: header.messages_count,
        batch_at: 4 + used,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_binary_protocol::codec::WireEncode;
    use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
    use iggy_binary_protocol::WireName;

    #[test]
    fn send_messages_splits_metadata_and_batch() {
        let stream = WireIdentifier::named("s").expect("name");
        let topic = WireIdentifier::numeric(3);
        let partitioning = WirePartitioning::PartitionId(1);
        let msgs = [RawMessage {
            id: 5,
            origin_timestamp: 10,
            headers: None,
            payload: b"hello",
        }];
        let mut buf = bytes::BytesMut::new();
        SendMessagesEncoder::encode(&mut buf, &stream, &topic, &partitioning, &msgs)
            .expect("encode");
        let Request::SendMessages(send) = decode_request(SEND_MESSAGES_CODE, &buf).expect("decode")
        else {
            panic!("not a send");
        };
        assert_eq!(send.stream_id, stream);
        assert_eq!(send.topic_id, topic);
        assert_eq!(send.partitioning, partitioning);
        assert_eq!(send.messages_count, 1);
        assert_eq!(buf.len() - send.batch_at, 256 + 48 + 5);
    }

    #[test]
    fn trailing_bytes_and_truncation_are_refused() {
        let mut get = GetStreamRequest {
            stream_id: WireIdentifier::numeric(1),
        }
        .to_bytes()
        .to_vec();
        assert!(decode_request(GET_STREAM_CODE, &get).is_ok());
        get.push(0);
        assert!(matches!(
            decode_request(GET_STREAM_CODE, &get),
            Err(DecodeError::Trailing { extra: 1, .. })
        ));
        let create = CreateStreamRequest {
            name: WireName::new("abc").expect("name"),
            options: iggy_binary_protocol::WireOptions::empty(),
        }
        .to_bytes();
        for cut in 0..create.len() {
            assert!(decode_request(CREATE_STREAM_CODE, &create[..cut]).is_err());
        }
    }

    #[test]
    fn bad_identifier_is_refused() {
        // kind 1 (numeric) must carry 4 bytes.
        assert!(decode_request(GET_STREAM_CODE, &[1, 2, 0, 0]).is_err());
        assert!(decode_request(GET_STREAM_CODE, &[9, 4, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn group_lifecycle_and_offset_requests_decode_whole_and_refuse_truncation() {
        let s = WireIdentifier::numeric(1);
        let t = WireIdentifier::named("t").expect("name");
        let g = WireIdentifier::named("g").expect("name");
        let join = JoinConsumerGroupRequest {
            stream_id: s.clone(),
            topic_id: t.clone(),
            group_id: g.clone(),
        }
        .to_bytes();
        let segments = DeleteSegmentsRequest {
            stream_id: s.clone(),
            topic_id: t.clone(),
            partition_id: 2,
            segments_count: 3,
        }
        .to_bytes();
        let partitions = CreatePartitionsRequest {
            stream_id: s,
            topic_id: t,
            partitions_count: 4,
        }
        .to_bytes();
        for (code, bytes) in [
            (JOIN_CONSUMER_GROUP_CODE, &join),
            (SYNC_CONSUMER_GROUP_CODE, &join),
            (DELETE_SEGMENTS_CODE, &segments),
            (CREATE_PARTITIONS_CODE, &partitions),
        ] {
            assert!(decode_request(code, bytes).is_ok(), "{code}");
            for cut in 0..bytes.len() {
                assert!(
                    decode_request(code, &bytes[..cut]).is_err(),
                    "{code} cut at {cut}"
                );
            }
        }
        let Ok(Request::SyncConsumerGroup(r)) = decode_request(SYNC_CONSUMER_GROUP_CODE, &join)
        else {
            panic!("not a sync");
        };
        assert_eq!(r.group_id, g);
        let Ok(Request::DeleteSegments(r)) = decode_request(DELETE_SEGMENTS_CODE, &segments) else {
            panic!("not a delete");
        };
        assert_eq!((r.partition_id, r.segments_count), (2, 3));
    }

    #[test]
    fn unknown_codes_are_unsupported() {
        assert!(matches!(
            decode_request(60_000, b"anything"),
            Ok(Request::Unsupported { code: 60_000 })
        ));
    }
}
