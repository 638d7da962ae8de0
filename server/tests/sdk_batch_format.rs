//! The SDK's SEND_MESSAGES batch is corelog's producer batch: each shared
//! test vector (`segment/tests/vectors`, the same files as shared/vectors),
//! re-encoded from its messages by the protocol crate's
//! `SendMessagesEncoder`, is admitted by corelog and carries the same
//! messages in the same layout. Where the vector's `origin_timestamp` is
//! the earliest message time (the spec's rule, which the SDK follows), the
//! bytes are identical; the `random-*` vectors have an `origin_timestamp`
//! below their earliest message (admission does not enforce the rule), so
//! there `origin_timestamp`, the `timestamp_delta`s and hence the checksums
//! differ, and nothing else.

use corelog::{BatchRef, Limits};
use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::{WireIdentifier, WirePartitioning};

/// The SDK's batch for the vector's messages.
fn sdk_batch(vector: &BatchRef<'_>) -> Vec<u8> {
    let messages: Vec<RawMessage<'_>> = vector
        .messages()
        .map(|m| RawMessage {
            id: m.id(),
            origin_timestamp: m.timestamp(),
            headers: Some(m.user_headers()),
            payload: m.payload(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    SendMessagesEncoder::encode(
        &mut buf,
        &WireIdentifier::numeric(1),
        &WireIdentifier::numeric(1),
        &WirePartitioning::PartitionId(0),
        &messages,
    )
    .expect("encode");
    buf[buf.len() - vector.len()..].to_vec()
}

#[test]
fn sdk_batches_are_corelog_producer_batches() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../segment/tests/vectors");
    let (mut identical, mut retimed) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(&dir).expect("vectors") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let Some(name) = name.strip_suffix(".producer.bin") else {
            continue;
        };
        let bytes = std::fs::read(&path).expect("read vector");
        let vector = BatchRef::new(&bytes, &Limits::default()).expect("vector is valid");
        let sdk = sdk_batch(&vector);
        let admitted =
            BatchRef::new(&sdk, &Limits::default()).expect("corelog admits the SDK batch");
        let earliest = vector.messages().map(|m| m.timestamp()).min();
        if earliest == Some(vector.origin_timestamp()) {
            assert_eq!(sdk, bytes, "{name}");
            identical.push(name.to_owned());
            continue;
        }
        // Same messages, same producer times, same layout.
        assert_eq!(admitted.len(), vector.len(), "{name}");
        assert_eq!(
            admitted.origin_timestamp(),
            earliest.expect("a message"),
            "{name}"
        );
        for (a, b) in admitted.messages().zip(vector.messages()) {
            assert_eq!(
                (a.id(), a.timestamp(), a.offset_delta()),
                (b.id(), b.timestamp(), b.offset_delta())
            );
            assert_eq!(
                (a.payload(), a.user_headers()),
                (b.payload(), b.user_headers())
            );
        }
        retimed.push(name.to_owned());
    }
    identical.sort();
    retimed.sort();
    assert_eq!(
        identical,
        ["headers-after-payload", "one-empty-message", "one-message"]
    );
    assert_eq!(retimed, ["random-0", "random-1", "random-2"]);
}
