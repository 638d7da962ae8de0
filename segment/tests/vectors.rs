//! The batches in `tests/vectors/` were made by an independent
//! implementation. Our codec must accept every producer batch, stamp it to
//! exactly the stamped bytes, and agree on every checksum.

use corelog_segment::{check, stamp_in_place, stamped_header, Batch, Limits, Stamp};
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn hex(v: &Value) -> u64 {
    let s = v.as_str().expect("hex string");
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

fn vectors() -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join("vectors.json")).expect("vectors.json");
    let v: Value = serde_json::from_str(&text).expect("json");
    v.as_array().expect("array").clone()
}

#[test]
fn every_vector_validates_stamps_and_agrees_on_checksums() {
    let limits = Limits::default();
    let all = vectors();
    assert!(all.len() >= 6, "expected the six shared vectors");
    for v in all {
        let name = v["name"].as_str().expect("name");
        let producer =
            std::fs::read(dir().join(v["producer"].as_str().expect("producer"))).expect("read");
        let stamped =
            std::fs::read(dir().join(v["stamped"].as_str().expect("stamped"))).expect("read");

        let batch = check(&producer, &limits)
            .unwrap_or_else(|e| panic!("{name}: producer batch refused: {e}"));
        assert_eq!(
            batch.batch_checksum(),
            hex(&v["producer_batch_checksum"]),
            "{name}"
        );
        assert_eq!(
            u64::from(batch.message_count()),
            v["message_count"].as_u64().expect("count"),
            "{name}"
        );
        assert_eq!(
            batch.batch_length(),
            v["batch_length"].as_u64().expect("len"),
            "{name}"
        );
        let frames: Vec<u64> = v["frame_checksums"]
            .as_array()
            .expect("frames")
            .iter()
            .map(hex)
            .collect();
        assert_eq!(
            batch.frame_checksums().collect::<Vec<_>>(),
            frames,
            "{name}"
        );
        for (i, m) in batch.messages().enumerate() {
            assert_eq!(m.offset_delta() as usize, i, "{name}");
        }

        let s = &v["stamp"];
        let stamp = Stamp {
            partition_id: s["partition_id"].as_u64().expect("pid"),
            base_offset: s["base_offset"].as_u64().expect("off"),
            base_timestamp: s["base_timestamp"].as_u64().expect("ts"),
        };
        // Header-only stamping (the append path): header + untouched blob.
        let header = stamped_header(batch, stamp);
        let mut joined = header.0.to_vec();
        joined.extend_from_slice(batch.blob());
        assert_eq!(
            joined, stamped,
            "{name}: stamped header + blob differ from the vector"
        );
        // The append path's stamp (from the checksums admission gathered)
        // gives the vector's header too.
        let mut admitted = Batch::admit(producer.clone(), &limits).expect("admit");
        assert_eq!(
            &admitted.stamped_header(stamp).0[..],
            &stamped[..header.0.len()],
            "{name}: the admitted batch's stamped header differs"
        );
        // In-place stamping gives the same bytes.
        let mut in_place = producer.clone();
        stamp_in_place(&mut in_place, stamp, &limits).expect("stamp");
        assert_eq!(in_place, stamped, "{name}: in-place stamp differs");

        let stored = Batch::admit(stamped.clone(), &limits)
            .unwrap_or_else(|e| panic!("{name}: stamped batch refused: {e}"));
        let stored = stored.as_ref();
        assert_eq!(
            stored.batch_checksum(),
            hex(&v["stamped_batch_checksum"]),
            "{name}"
        );
        assert_eq!(stored.partition_id(), stamp.partition_id);
        assert_eq!(stored.base_offset(), stamp.base_offset);
        assert_eq!(stored.base_timestamp(), stamp.base_timestamp);
        // Frame bytes are never touched by stamping.
        assert_eq!(stored.blob(), batch.blob(), "{name}");
        for m in stored.messages() {
            assert_eq!(m.offset(), stamp.base_offset + u64::from(m.offset_delta()));
        }
    }
}

#[test]
fn headers_after_payload_vector_reads_payload_first() {
    let producer = std::fs::read(dir().join("headers-after-payload.producer.bin")).expect("read");
    let batch = check(&producer, &Limits::default()).expect("valid");
    for m in batch.messages() {
        let frame = m.frame_bytes();
        assert_eq!(m.payload(), &frame[48..48 + m.payload().len()]);
        assert_eq!(m.user_headers(), &frame[48 + m.payload().len()..]);
        assert_eq!(
            m.timestamp(),
            batch.origin_timestamp() + u64::from(m.timestamp_delta())
        );
    }
    assert!(
        batch.messages().any(|m| !m.user_headers().is_empty()),
        "vector should carry user headers"
    );
}
