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
//! | a log short of the snapshot's end                   | reported (a warning, and the count   |
//! |                                                     |   in `GroupView::at_open`; only      |
//! |                                                     |   under a policy that does not sync: |
//! |                                                     |   those bytes were never durable)    |
//!
//! Then each partition's commit mark is set to the snapshot's end: what
//! lies below it is committed; the entries after it move the marks as
//! raft-rs applies them again.

use super::ends::{decode_ends, encode_ends};
use crate::command::Command;
use crate::error::GroupError;
use crate::journal::{Journal, Pointer};
use crate::machine::MetaMachine;
use corelog::replication::ReplicaLog;
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
    /// Partitions whose logs end short of what the journal and snapshot
    /// name (each logged with its figures).
    pub short: u64,
}

impl Reconciled {
    /// Says what was found and done: in the log, and in the counts the
    /// group's status publishes (`GroupView::at_open`).
    pub(super) fn report(&self, group: u32, status: Option<&crate::status::GroupStatus>) {
        self.log(group);
        let counts = crate::status::AtOpen {
            filled: self.filled,
            converted: self.converted,
            logs_cut: self.logs_cut.len() as u64,
            journal_cut: self.journal_cut.is_some(),
            short_logs: self.short,
        };
        if let Some(status) = status {
            counts.publish(status);
        }
    }

    /// Says what was found and done, in one line.
    fn log(&self, group: u32) {
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
    let snapshot_ends: BTreeMap<u64, u64> = decode_ends(&journal.snapshot().data)
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut r = Reconcile {
        group,
        engine,
        limits: engine.limits(),
        ends: snapshot_ends.clone(),
        out: Reconciled::default(),
        retained_away: None,
    };
    r.entries(journal, meta)?;
    if let Some((index, at)) = r.retained_away.take() {
        let at: Vec<(u64, u64)> = at.into_iter().collect();
        journal
            .compact(index, encode_ends(&at))
            .map_err(|source| GroupError::Journal { group, source })?;
        r.out.compacted = Some(index);
    }
    r.cut_logs(shard)?;
    for (partition, end) in snapshot_ends {
        match engine.set_commit_mark(partition, end).wait() {
            Ok(()) | Err(RequestError::UnknownPartition { .. }) => {}
            Err(e) => return Err(r.engine_err(partition, e)),
        }
    }
    Ok(r.out)
}

/// A reconcile under way.
struct Reconcile<'a> {
    group: u32,
    engine: &'a Handle,
    limits: corelog::Limits,
    /// Each partition's end as the snapshot and the entries so far name it.
    ends: BTreeMap<u64, u64>,
    out: Reconciled,
    /// The last entry whose batch retention deleted, and each partition's
    /// end up to it: the journal is compacted there.
    retained_away: Option<(u64, BTreeMap<u64, u64>)>,
}

impl Reconcile<'_> {
    fn engine_err(&self, partition: u64, source: RequestError) -> GroupError {
        GroupError::Engine {
            group: self.group,
            partition,
            source: Box::new(source),
        }
    }

    /// A partition's log, by what the engine says of it (`None`: no such
    /// partition).
    fn stats(&self, partition: u64) -> Result<Option<corelog::LogStats>, GroupError> {
        match self.engine.stats(partition).wait() {
            Ok(s) => Ok(Some(s)),
            Err(RequestError::UnknownPartition { .. }) => Ok(None),
            Err(e) => Err(self.engine_err(partition, e)),
        }
    }

    /// The whole batch `p` points at in `partition`'s log, if it is there.
    fn written(&self, partition: u64, p: &Pointer) -> Result<Option<bytes::Bytes>, GroupError> {
        let got = self
            .engine
            .read_written(partition, p.base_offset)
            .wait()
            .map(|w| w.map(bytes::Bytes::from))
            .or_else(|e| match e {
                RequestError::UnknownPartition { .. } => Ok(None),
                e => Err(e),
            })
            .map_err(|e| self.engine_err(partition, e))?;
        Ok(
            got.filter(|b| {
                Batch::admit(b.clone(), &self.limits).is_ok_and(|b| p.names(b.as_ref()))
            }),
        )
    }

    /// Each entry after the snapshot, in log order, until one cuts the
    /// journal.
    fn entries(&mut self, journal: &mut Journal, meta: &dyn MetaMachine) -> Result<(), GroupError> {
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
            let cut = match journal.pointer(index) {
                Some(p) => self.pointed(journal, index, partition, &p)?,
                None => self.whole(index, partition, data)?,
            };
            if let Some(why) = cut {
                journal
                    .cut_from(index)
                    .map_err(|source| GroupError::Journal {
                        group: self.group,
                        source,
                    })?;
                self.out.journal_cut = Some(why);
                break;
            }
        }
        Ok(())
    }

    /// A pointer record's row: kept (its batch read back, or deleted by
    /// retention), or why the journal is cut there.
    fn pointed(
        &mut self,
        journal: &mut Journal,
        index: u64,
        partition: u64,
        p: &Pointer,
    ) -> Result<Option<String>, GroupError> {
        if let Some(bytes) = self.written(partition, p)? {
            journal.fill(index, bytes);
            self.out.filled += 1;
            self.ends.insert(partition, p.next_offset());
            return Ok(None);
        }
        let first = self.stats(partition)?.map_or(0, |s| s.first_offset);
        if p.next_offset() <= first {
            // Deleted by retention, which takes only the oldest segments:
            // stored and applied, compacted below.
            self.ends.insert(partition, p.next_offset());
            self.retained_away = Some((index, self.ends.clone()));
            return Ok(None);
        }
        Ok(Some(format!(
            "entry {index}: partition {partition} holds no batch at offset {} as its pointer names",
            p.base_offset
        )))
    }

    /// A whole batch record's row (a version-02 journal): kept when its
    /// log holds it, written into the log when it ends where the batch
    /// starts, else why the journal is cut there.
    fn whole(
        &mut self,
        index: u64,
        partition: u64,
        data: bytes::Bytes,
    ) -> Result<Option<String>, GroupError> {
        let Ok(batch) = Batch::admit(data, &self.limits) else {
            return Ok(None);
        };
        let Some(p) = Pointer::of(batch.as_ref()) else {
            return Ok(None);
        };
        let end = self.stats(partition)?.map_or(0, |s| s.end_offset);
        if self.written(partition, &p)?.is_some() {
            self.ends.insert(partition, p.next_offset());
            return Ok(None);
        }
        if end != p.base_offset {
            return Ok(Some(format!(
                "entry {index}: partition {partition} ends at {end}, the entry's batch starts at {}",
                p.base_offset
            )));
        }
        self.engine
            .append_stamped_admitted(partition, batch)
            .wait()
            .map_err(|e| self.engine_err(partition, e))?;
        self.out.converted += 1;
        self.ends.insert(partition, p.next_offset());
        Ok(None)
    }

    /// Each of the shard's partitions cut past the end the journal and the
    /// snapshot name (written, pointer not durable).
    fn cut_logs(&mut self, shard: usize) -> Result<(), GroupError> {
        let group = self.group;
        let partitions = self
            .engine
            .partitions()
            .wait()
            .map_err(|e| self.engine_err(0, e))?;
        for partition in partitions
            .into_iter()
            .filter(|p| self.engine.shard_of(*p) == shard)
        {
            let want = self.ends.get(&partition).copied().unwrap_or(0);
            let Some(have) = self.stats(partition)?.map(|s| s.end_offset) else {
                continue;
            };
            if have > want {
                self.engine
                    .cut_suffix(partition, want)
                    .wait()
                    .map_err(|source| GroupError::Cut {
                        group,
                        partition,
                        offset: want,
                        source: Box::new(source),
                    })?;
                self.out.logs_cut.push((partition, want));
            } else if have < want {
                self.out.short += 1;
                tracing::warn!(
                    "group {group}: partition {partition} ends at {have}, short of the {want} its journal and snapshot name (written under a policy that does not sync, and lost)"
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::Reconciled;
    use std::sync::{Arc, Mutex};

    /// The line `r` reports at open for group 3.
    fn logged(r: &Reconciled) -> String {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Captured::default();
        let to = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || to.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || r.report(3, None));
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// Recovery says what it cut: the open's line names each thing done,
    /// and only what was done.
    #[test]
    fn the_open_says_what_it_cut_converted_and_compacted() {
        let all = Reconciled {
            filled: 4,
            converted: 2,
            journal_cut: Some("entry 9 (its batch differs)".into()),
            logs_cut: vec![(1, 12)],
            compacted: Some(7),
            short: 0,
        };
        let line = logged(&all);
        for said in [
            "group 3: 4 entries' batches read back from the partition logs",
            ", 2 written into them from a version-02 journal",
            "; journal cut at entry 9 (its batch differs)",
            "; partition logs cut past their last journaled batch (partition, offset): [(1, 12)]",
            "; compacted to entry 7, whose batch retention deleted",
        ] {
            assert!(line.contains(said), "{said:?} missing from {line:?}");
        }

        let line = logged(&Reconciled {
            filled: 4,
            ..Reconciled::default()
        });
        assert!(
            line.contains("group 3: 4 entries' batches read back"),
            "{line}"
        );
        for unsaid in ["version-02", "journal cut", "logs cut", "compacted"] {
            assert!(
                !line.contains(unsaid),
                "{unsaid:?} said of nothing: {line:?}"
            );
        }
    }
}
