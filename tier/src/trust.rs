//! Whether a partition's manifest in the store was written from this
//! partition's log. A data directory started afresh against a prefix that
//! an earlier one filled finds manifests of partitions it never held: its
//! partition 1 is not theirs. Trusting such a manifest would skip uploads
//! below its end and remove local segments it does not hold. So, on a
//! single node, before the first upload or trim of a run, the log and the
//! manifest must agree on a segment: one that both hold starts with the
//! same stamped batch header (its timestamp and checksum make a batch of
//! another log differ), or the log continues exactly where the store ends.
//! In a cluster, segment boundaries differ between nodes and the manifest
//! is the group's: it is trusted as the leader's.

use crate::error::TierError;
use crate::manifest::{log_key, Manifest};
use crate::tier::Tier;
use corelog_segment::layout::BATCH_HEADER_LEN;
use corelog_segment::log::SealedSegment;
use std::io::Read;

/// What comparing a log with the store's manifest found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Agreement {
    /// The manifest describes this log.
    Agrees,
    /// Nothing to compare yet (no sealed segment): wait.
    Undecided,
}

impl Tier {
    /// Compares the log's sealed segments with `m` (see the module doc).
    pub(crate) fn agreement(
        &self,
        partition: u64,
        m: &Manifest,
        sealed: &[SealedSegment],
    ) -> Result<Agreement, TierError> {
        let (Some(end), Some(oldest)) = (m.segments.last(), sealed.first()) else {
            return Ok(if m.segments.is_empty() {
                Agreement::Agrees
            } else {
                Agreement::Undecided
            });
        };
        if oldest.base_offset >= end.next_offset {
            return Ok(Agreement::Agrees);
        }
        let foreign = |reason: String| TierError::Foreign { partition, reason };
        let Some((local, remote)) = sealed.iter().find_map(|s| {
            let r = m.segments.iter().find(|r| r.base_offset == s.base_offset)?;
            Some((s, r))
        }) else {
            return Err(foreign(format!(
                "the store holds offsets {}..{}, and no local segment from {} on starts where one of its segments does",
                m.start_offset().unwrap_or(0),
                end.next_offset,
                oldest.base_offset
            )));
        };
        let mine = first_header(&local.log_path).map_err(|source| {
            TierError::Store(crate::StoreError::Local {
                path: local.log_path.clone(),
                source,
            })
        })?;
        let key = log_key(partition, remote);
        let theirs = self
            .config
            .store
            .get(&key, Some(0..BATCH_HEADER_LEN as u64))?;
        if mine != theirs {
            return Err(foreign(format!(
                "{} does not start with the batch {} starts with",
                self.config.store.object_name(&key),
                local.log_path.display()
            )));
        }
        Ok(Agreement::Agrees)
    }
}

fn first_header(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut head = vec![0u8; BATCH_HEADER_LEN];
    std::fs::File::open(path)?.read_exact(&mut head)?;
    Ok(head)
}
