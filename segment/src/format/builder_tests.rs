//! The builder's batches as admission sees them (apart from both files,
//! which the tests of each would otherwise join in a circle).

use super::admission::{check, Limits};
use super::builder::{set_origin_timestamp, BatchBuilder, MessageSpec};

#[test]
fn retimed_batches_stay_valid_and_carry_the_new_origin() {
    let mut b = BatchBuilder::new();
    for i in 0..5u64 {
        b.push(MessageSpec {
            id: u128::from(i),
            timestamp: 1_000 + i * 3,
            payload: &[i as u8; 17],
            user_headers: b"h",
        });
    }
    let mut bytes = b.build().expect("valid");
    let before = check(&bytes, &Limits::default())
        .expect("valid")
        .messages()
        .map(|m| m.timestamp_delta())
        .collect::<Vec<_>>();
    set_origin_timestamp(&mut bytes, 9_000_000).expect("retimed");
    let view = check(&bytes, &Limits::default()).expect("still valid");
    assert_eq!(view.origin_timestamp(), 9_000_000);
    assert_eq!(
        view.messages()
            .map(|m| m.timestamp_delta())
            .collect::<Vec<_>>(),
        before
    );
    let mut short = bytes[..bytes.len() - 1].to_vec();
    let copy = short.clone();
    assert_eq!(set_origin_timestamp(&mut short, 1), None);
    assert_eq!(short, copy, "malformed bytes are left alone");
}

/// Regression: `BatchBuilder::default()` was derived, so it had no
/// header bytes and built batches admission refuses.
#[test]
fn a_default_builder_builds_what_new_builds() {
    let build = |mut b: BatchBuilder| {
        b.push(MessageSpec {
            id: 7,
            timestamp: 1_000,
            payload: b"payload",
            user_headers: b"",
        });
        b.build().expect("valid")
    };
    let from_default = build(BatchBuilder::default());
    check(&from_default, &Limits::default()).expect("admitted");
    assert_eq!(from_default, build(BatchBuilder::new()));
}
