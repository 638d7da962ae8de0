//! After a restart: a data group's journal against its partition logs.
//!
//! A send's batch is written to its partition's log and a pointer to it to
//! the journal (`write.rs`); a crash can leave either without the other.
//! Neither was acknowledged (this node says it holds an entry only once
//! both are done), so each is cut. As a table of cases, for each entry
//! after the snapshot, in log order, then for each partition of the shard:
//!
//! | found                                               | done                                 |
//! |-----------------------------------------------------|--------------------------------------|
//! | a pointer whose batch the log holds (same offset,   | kept; the entry's data is a view of  |
//! |   length, checksum, count; the batch verifies)      |   the segment                        |
//! | a pointer whose batch the log lacks or differs      | the journal cut from that entry      |
//! | an entry journaled whole (a version-02 journal),    | kept                                 |
//! |   its batch in the log                              |                                      |
//! | such an entry at the log's end (never applied)      | its batch written to the log: the    |
//! |                                                     |   journal converts as it is read     |
//! | such an entry past the log's end (a gap)            | the journal cut from that entry      |
//! | a log reaching past the last batch the journal or   | the log cut there (`cut_suffix`,     |
//! |   the snapshot names (written, pointer not durable) |   crash-safe)                        |
//! | a pointer below the log's first offset (retention   | kept; the journal compacted past it  |
//! |   deleted its segment: stored and applied)          |   (a snapshot of the ends up to it)  |
//! | a log short of the snapshot's end                   | reported (only under a policy that   |
//! |                                                     |   does not sync: those bytes were    |
//! |                                                     |   never durable)                     |
//!
//! Then each partition's commit mark is set to the snapshot's end: what
//! lies below it is committed; the entries after it move the marks as
//! raft-rs applies them again.

use super::ends::{decode_ends, encode_ends};
use crate::command::Command;
use crate::error::GroupError;
use crate::journal::{Journal, Pointer};
use crate::machine::MetaMachine;
use corelog::{Batch, Handle, RequestError};
use std::collections::BTreeMap;

/// What reconciling found and did, for the log line at open.
#[derive(Debug, Default)]
pub(super) struct Reconciled {
    /// Entries whose batches were read back from the logs.
    pub filled: u64,
    /// Version-02 entries whose batches were written into the logs.
    pub converted: u64,
    /// Where the journal was cut, and why.
    pub journal_cut: Option<String>,
    /// Partitions cut, and from which offset.
    pub logs_cut: Vec<(u64, u64)>,
    /// Where the journal was compacted: entries whose batches retention
    /// deleted lie at or below it.
    pub compacted: Option<u64>,
}

impl Reconciled {
    /// Says what was found and done, in one line.
    pub(super) fn log(&self, group: u32) {
        let mut extra = String::new();
        if self.converted > 0 {
            extra += &format!(
                ", {} written into them from a version-02 journal",
                self.converted
            );
        }
        if let Some(c) = &self.journal_cut {
            extra += &format!("; journal cut at {c}");
        }
        if !self.logs_cut.is_empty() {
            extra += &format!(
                "; partition logs cut past their last journaled batch (partition, offset): {:?}",
                self.logs_cut
            );
        }
        if let Some(i) = self.compacted {
            extra += &format!("; compacted to entry {i}, whose batch retention deleted");
        }
        tracing::info!(
            "group {group}: {} entries' batches read back from the partition logs{extra}",
            self.filled
        );
    }
}

/// Reconciles group `group`'s journal with the logs of `shard`'s
/// partitions (see the table above).
pub(super) fn reconcile(
    group: u32,
    journal: &mut Journal,
    engine: &Handle,
    shard: usize,
    meta: &dyn MetaMachine,
) -> Result<Reconciled, GroupError> {
    let engine_err = |partition: u64| {
        move |source: RequestError| GroupError::Engine {
            group,
            partition,
            source: Box::new(source),
        }
    };
    let snapshot_ends: BTreeMap<u64, u64> = decode_ends(&journal.snapshot().data)
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut ends = snapshot_ends.clone();
    let mut out = Reconciled::default();
    let limits = engine.limits();
    // The last entry whose batch retention deleted, and each partition's
    // end up to it: the journal is compacted there.
    let mut retained_away: Option<(u64, BTreeMap<u64, u64>)> = None;
    let first_offset = |partition: u64| -> Result<u64, GroupError> {
        match engine.stats(partition).wait() {
            Ok(s) => Ok(s.first_offset),
            Err(RequestError::UnknownPartition { .. }) => Ok(0),
            Err(e) => Err(engine_err(partition)(e)),
        }
    };
    for index in journal.first_index()..=journal.last_index() {
        let Some((context, data)) = journal
            .entry(index)
            .map(|e| (e.context.clone(), e.data.clone()))
        else {
            break;
        };
        let Ok(Command::Append { partition, .. }) = Command::decode(&context) else {
            continue;
        };
        if !meta.keeps(partition) {
            continue;
        }
        let written = |p: &Pointer| -> Result<Option<bytes::Bytes>, GroupError> {
            let got = engine
                .read_written(partition, p.base_offset)
                .wait()
                .or_else(|e| match e {
                    RequestError::UnknownPartition { .. } => Ok(None),
                    e => Err(e),
                })
                .map_err(engine_err(partition))?;
            Ok(got.filter(|b| Batch::admit(b.clone(), &limits).is_ok_and(|b| p.names(b.as_ref()))))
        };
        let cut = match journal.pointer(index) {
            Some(p) => match written(&p)? {
                Some(bytes) => {
                    journal.fill(index, bytes);
                    out.filled += 1;
                    ends.insert(partition, p.next_offset());
                    None
                }
                None if p.next_offset() <= first_offset(partition)? => {
                    // Deleted by retention, which takes only the oldest
                    // segments: stored and applied, compacted below.
                    ends.insert(partition, p.next_offset());
                    retained_away = Some((index, ends.clone()));
                    None
                }
                None => Some(format!(
                    "entry {index}: partition {partition} holds no batch at offset {} as its pointer names",
                    p.base_offset
                )),
            },
            None => {
                let Ok(batch) = Batch::admit(data, &limits) else {
                    continue;
                };
                let Some(p) = Pointer::of(batch.as_ref()) else {
                    continue;
                };
                let end = match engine.stats(partition).wait() {
                    Ok(s) => s.end_offset,
                    Err(RequestError::UnknownPartition { .. }) => 0,
                    Err(e) => return Err(engine_err(partition)(e)),
                };
                if written(&p)?.is_some() {
                    ends.insert(partition, p.next_offset());
                    None
                } else if end == p.base_offset {
                    engine
                        .append_stamped_admitted(partition, batch)
                        .wait()
                        .map_err(engine_err(partition))?;
                    out.converted += 1;
                    ends.insert(partition, p.next_offset());
                    None
                } else {
                    Some(format!(
                        "entry {index}: partition {partition} ends at {end}, the entry's batch starts at {}",
                        p.base_offset
                    ))
                }
            }
        };
        if let Some(why) = cut {
            journal
                .cut_from(index)
                .map_err(|source| GroupError::Journal { group, source })?;
            out.journal_cut = Some(why);
            break;
        }
    }
    if let Some((index, at)) = retained_away {
        let at: Vec<(u64, u64)> = at.into_iter().collect();
        journal
            .compact(index, encode_ends(&at))
            .map_err(|source| GroupError::Journal { group, source })?;
        out.compacted = Some(index);
    }
    let partitions = engine.partitions().wait().map_err(engine_err(0))?;
    for partition in partitions
        .into_iter()
        .filter(|p| engine.shard_of(*p) == shard)
    {
        let want = ends.get(&partition).copied().unwrap_or(0);
        let have = match engine.stats(partition).wait() {
            Ok(s) => s.end_offset,
            Err(RequestError::UnknownPartition { .. }) => continue,
            Err(e) => return Err(engine_err(partition)(e)),
        };
        if have > want {
            engine
                .cut_suffix(partition, want)
                .wait()
                .map_err(|source| GroupError::Cut {
                    group,
                    partition,
                    offset: want,
                    source: Box::new(source),
                })?;
            out.logs_cut.push((partition, want));
        } else if have < want {
            tracing::warn!(
                "group {group}: partition {partition} ends at {have}, short of the {want} its journal and snapshot name (written under a policy that does not sync, and lost)"
            );
        }
    }
    for (partition, end) in snapshot_ends {
        match engine.set_commit_mark(partition, end).wait() {
            Ok(()) | Err(RequestError::UnknownPartition { .. }) => {}
            Err(e) => return Err(engine_err(partition)(e)),
        }
    }
    Ok(out)
}
