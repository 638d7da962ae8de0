//! The options blocks of streams, topics and users, checked and answered as
//! Iggy's server does at the pinned commit: a topic's keys are Iggy's topic
//! catalog (`TOPIC_OPTION_KEYS`), an update may carry only the updatable
//! ones, streams and users have no keys (any key is refused by name), a
//! zero sentinel means "the default" and is never stored, and GET_TOPIC
//! answers the keys the client sent (explicit) apart from the values the
//! server resolved for the others (derived).
//!
//! The derived values are corelog's own, where it has one: no compression,
//! no expiry, no size cap, the server's segment size (`--segment-bytes`),
//! `enforce_fsync` true exactly when sends are acknowledged once synced
//! (`--fsync batch`), no whole-segment preallocation. Iggy's flush
//! thresholds (`messages_required_to_save`, `size_of_messages_required_to_save`)
//! have no counterpart in corelog, so no derived value is claimed for them.
//! A topic's own `segment_size` is stored and answered (and floors its
//! `max_topic_size`, as in Iggy), but corelog's segments are sized by the
//! server.

use iggy_binary_protocol::responses::system::OptionDescriptor;
use iggy_binary_protocol::{WireName, WireOptions};
use iggy_common::{
    topic_option_keys, validate_topic_segment_size, HeaderKey, HeaderKind, HeaderValue,
    IggyByteSize, IggyError, MaxTopicSize, OptionValue, OptionsProvenance, ResourceOptions,
    TopicCreateOptions, MAX_TOPIC_SEGMENT_SIZE, TOPIC_OPTION_KEYS, UPDATABLE_TOPIC_OPTION_KEYS,
};
use std::str::FromStr;

/// What the server resolves a topic's absent keys to.
#[derive(Debug, Clone, Copy)]
pub struct TopicDefaults {
    /// The server's segment size in bytes.
    pub segment_bytes: u64,
    /// Whether a send is acknowledged only once synced.
    pub durable_acks: bool,
}

/// Refuses any key: streams and users have none (Iggy's
/// `UPDATABLE_STREAM_OPTION_KEYS` and `UPDATABLE_USER_OPTION_KEYS` are
/// empty, and their creation takes none either).
pub fn refuse_keys(options: &WireOptions) -> Result<(), IggyError> {
    only_keys(options, &[])
}

fn only_keys(options: &WireOptions, known: &[&str]) -> Result<(), IggyError> {
    for entry in options {
        let key = String::from_utf8_lossy(entry.key);
        if !known.contains(&key.as_ref()) {
            return Err(IggyError::UnsupportedOptionKey(key.into_owned()));
        }
    }
    Ok(())
}

/// The block a new topic stores: the keys the client sent, canonical, with
/// zero sentinels dropped. Refuses an unknown key, a value of the wrong
/// kind or out of its bounds (a flush threshold of 0, a segment size
/// outside Iggy's bounds), and a `max_topic_size` below one segment
/// (InvalidTopicSize).
pub fn for_create(options: &WireOptions, defaults: TopicDefaults) -> Result<Vec<u8>, IggyError> {
    let parsed = TopicCreateOptions::parse(options)?;
    if let Some(segment) = parsed.segment_size {
        validate_topic_segment_size(segment.as_bytes_u64(), MAX_TOPIC_SEGMENT_SIZE)?;
    }
    let segment = parsed
        .segment_size
        .map_or(defaults.segment_bytes, |s| s.as_bytes_u64());
    if let Some(max) = parsed.max_topic_size {
        floor(max, segment)?;
    }
    Ok(parsed.to_wire()?.as_bytes().to_vec())
}

/// The block an update sets over a topic's stored one: only the updatable
/// keys (`segment_size` and the other storage settings are create-only),
/// canonical, zero sentinels dropped (an update states the values it
/// wants; what it omits survives). A `max_topic_size` below the topic's
/// segment size is refused.
pub fn for_update(
    options: &WireOptions,
    stored: &[u8],
    defaults: TopicDefaults,
) -> Result<WireOptions, IggyError> {
    only_keys(options, UPDATABLE_TOPIC_OPTION_KEYS)?;
    let parsed = TopicCreateOptions::parse(options)?;
    if let Some(max) = parsed.max_topic_size {
        let segment = committed(stored)
            .segment_size
            .map_or(defaults.segment_bytes, |s| s.as_bytes_u64());
        floor(max, segment)?;
    }
    parsed.to_wire()
}

/// A cap below one segment can never be kept (Iggy's rule); unlimited
/// (`u64::MAX`) passes.
fn floor(max: MaxTopicSize, segment: u64) -> Result<(), IggyError> {
    if max.as_bytes_u64() < segment {
        return Err(IggyError::InvalidTopicSize(
            max,
            IggyByteSize::from(segment),
        ));
    }
    Ok(())
}

/// A stored block, read as far as this build understands it.
fn committed(stored: &[u8]) -> TopicCreateOptions {
    TopicCreateOptions::parse_committed(&WireOptions::from_validated(stored.to_vec().into()))
}

/// The (explicit, derived) blocks GET_TOPIC answers for a stored block.
/// Explicit is re-encoded canonically (a block stored before sentinels were
/// dropped answers without them).
pub fn answer(
    stored: &[u8],
    defaults: TopicDefaults,
) -> Result<(WireOptions, WireOptions), IggyError> {
    let parsed = committed(stored);
    let mut derived = ResourceOptions::new();
    let mut put = |key: &str, value: HeaderValue| {
        if let Ok(key) = HeaderKey::from_str(key) {
            derived.insert(key, OptionValue::derived(value));
        }
    };
    if parsed.compression_algorithm.is_none() {
        let none = iggy_common::CompressionAlgorithm::default().to_string();
        if let Ok(v) = HeaderValue::try_from(none.as_str()) {
            put(topic_option_keys::COMPRESSION_ALGORITHM, v);
        }
    }
    if parsed.message_expiry.is_none() {
        put(
            topic_option_keys::MESSAGE_EXPIRY,
            HeaderValue::from(u64::MAX),
        );
    }
    if parsed.max_topic_size.is_none() {
        put(
            topic_option_keys::MAX_TOPIC_SIZE,
            HeaderValue::from(u64::MAX),
        );
    }
    if parsed.segment_size.is_none() {
        put(
            topic_option_keys::SEGMENT_SIZE,
            HeaderValue::from(defaults.segment_bytes),
        );
    }
    if parsed.enforce_fsync.is_none() {
        put(
            topic_option_keys::ENFORCE_FSYNC,
            HeaderValue::from(defaults.durable_acks),
        );
    }
    if parsed.preallocate_segments.is_none() {
        put(
            topic_option_keys::PREALLOCATE_SEGMENTS,
            HeaderValue::from(false),
        );
    }
    let derived =
        iggy_common::wire_conversions::resource_options_to_wire(&derived, OptionsProvenance::All)?;
    Ok((parsed.to_wire()?, derived))
}

/// DESCRIBE_OPTIONS for topics: every key a topic takes (Iggy's catalog,
/// exactly: a client discovers keys here), its kind, and the value this
/// server resolves it to when a topic does not set it (none for Iggy's
/// flush thresholds, which corelog has not).
pub fn catalog(defaults: TopicDefaults) -> Result<Vec<OptionDescriptor>, IggyError> {
    let (_, derived) = answer(&[], defaults)?;
    let derived = iggy_common::wire_conversions::resource_options_from_wire(&derived, false)?;
    TOPIC_OPTION_KEYS
        .iter()
        .map(|&key| {
            let (kind, default_value) = match derived.get(&HeaderKey::from_str(key)?) {
                Some(v) => (v.value.kind(), v.value.value()),
                None if key == topic_option_keys::MESSAGES_REQUIRED_TO_SAVE => {
                    (HeaderKind::Uint32, bytes::Bytes::new())
                }
                None => (HeaderKind::Uint64, bytes::Bytes::new()),
            };
            Ok(OptionDescriptor {
                key: WireName::new(key).map_err(|_| IggyError::InvalidFormat)?,
                kind: kind.as_code(),
                default_value,
                description: describe(key).to_owned(),
            })
        })
        .collect()
}

fn describe(key: &str) -> &'static str {
    match key {
        topic_option_keys::COMPRESSION_ALGORITHM => "compression of the messages (none, gzip)",
        topic_option_keys::MESSAGE_EXPIRY => {
            "microseconds (or a duration such as 7 days) after which a sealed segment whose newest message is older is deleted"
        }
        topic_option_keys::MAX_TOPIC_SIZE => {
            "bytes the topic may hold, shared by its partitions; the oldest sealed segments go past it (at least one segment)"
        }
        topic_option_keys::SEGMENT_SIZE => {
            "stored and answered; corelog's segments are sized by the server (--segment-bytes)"
        }
        topic_option_keys::ENFORCE_FSYNC => {
            "whether a send is acknowledged only once synced: the server's --fsync policy decides"
        }
        topic_option_keys::PREALLOCATE_SEGMENTS => {
            "whole-segment preallocation; corelog preallocates a step ahead of the writes instead"
        }
        _ => "Iggy's flush threshold; corelog has none (stored and answered)",
    }
}

/// Iggy's code of the topic's compression algorithm (none unless set).
pub fn compression(stored: &[u8]) -> u8 {
    committed(stored)
        .compression_algorithm
        .unwrap_or_default()
        .as_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_common::{IggyExpiry, TopicUpdateOptions};

    const DEFAULTS: TopicDefaults = TopicDefaults {
        segment_bytes: 1 << 30,
        durable_acks: true,
    };

    fn create(o: TopicCreateOptions) -> Result<Vec<u8>, IggyError> {
        for_create(&o.to_wire().expect("wire"), DEFAULTS)
    }

    #[test]
    fn sentinels_are_not_stored_and_resolve_as_derived() {
        let stored = create(TopicCreateOptions {
            message_expiry: Some(IggyExpiry::from(0u64)),
            max_topic_size: Some(MaxTopicSize::from(0u64)),
            segment_size: Some(IggyByteSize::from(0u64)),
            ..TopicCreateOptions::default()
        })
        .expect("sentinels are accepted");
        let (explicit, derived) = answer(&stored, DEFAULTS).expect("answer");
        assert!(explicit.is_empty());
        let derived =
            iggy_common::wire_conversions::resource_options_from_wire(&derived, false).expect("d");
        let get = |k: &str| derived.get(&HeaderKey::from_str(k).expect("key")).cloned();
        assert_eq!(
            get(topic_option_keys::SEGMENT_SIZE).map(|v| v.value),
            Some(HeaderValue::from(1u64 << 30))
        );
        assert_eq!(
            get(topic_option_keys::MAX_TOPIC_SIZE).map(|v| v.value),
            Some(HeaderValue::from(u64::MAX))
        );
        assert!(get(topic_option_keys::MESSAGES_REQUIRED_TO_SAVE).is_none());
    }

    #[test]
    fn bounds_are_iggys() {
        let small_segment = create(TopicCreateOptions {
            segment_size: Some(IggyByteSize::from(1024u64)),
            ..TopicCreateOptions::default()
        });
        assert!(matches!(
            small_segment,
            Err(IggyError::InvalidOptionValue(_))
        ));
        let tiny = create(TopicCreateOptions {
            max_topic_size: Some(MaxTopicSize::from(10_240u64)),
            ..TopicCreateOptions::default()
        });
        assert!(
            matches!(tiny, Err(IggyError::InvalidTopicSize(..))),
            "{tiny:?}"
        );
        let zero = create(TopicCreateOptions {
            messages_required_to_save: Some(0),
            ..TopicCreateOptions::default()
        });
        assert!(zero.is_err());
        let stored = create(TopicCreateOptions {
            segment_size: Some(IggyByteSize::from(8u64 << 20)),
            max_topic_size: Some(MaxTopicSize::from(8u64 << 20)),
            ..TopicCreateOptions::default()
        })
        .expect("a cap of one segment");
        let update = |max: u64| {
            let o = TopicUpdateOptions {
                max_topic_size: Some(MaxTopicSize::from(max)),
                ..TopicUpdateOptions::default()
            };
            for_update(&o.to_wire().expect("wire"), &stored, DEFAULTS)
        };
        assert!(matches!(
            update(4 << 20),
            Err(IggyError::InvalidTopicSize(..))
        ));
        assert!(update(8 << 20).is_ok());
        assert!(update(0).expect("sentinel").is_empty());
    }

    #[test]
    fn storage_keys_are_create_only() {
        let mut raw = std::collections::BTreeMap::new();
        raw.insert("segment_size".to_owned(), "2MiB".to_owned());
        let o = TopicUpdateOptions {
            raw,
            ..TopicUpdateOptions::default()
        };
        let r = for_update(&o.to_wire().expect("wire"), &[], DEFAULTS);
        assert!(
            matches!(r, Err(IggyError::UnsupportedOptionKey(_))),
            "{r:?}"
        );
    }
}
