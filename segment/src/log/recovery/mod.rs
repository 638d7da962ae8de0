//! Opening a partition log: recovery as a table of cases.
//!
//! Segments are checked oldest first. A sealed segment whose index carries a
//! valid seal record is *confirmed*: it was durable before the record was
//! written, so it is trusted and only its tail (from its last index entry)
//! is verified (all of it under [`OpenCheck::Full`](super::OpenCheck)). Any
//! other segment (the last one, or one whose sealing a crash interrupted) is
//! *recovered*: every batch after its last trustworthy index entry is
//! verified (index entries are only ever written for durable batches, so
//! nothing before the last one can be a hole a power cut left).
//!
//! What recovery will do is decided from the bytes alone (`plan.rs`) and
//! then done (`apply.rs`); `verify` prints the same plan without doing it.
//!
//! | case | found in | what open does |
//! |---|---|---|
//! | suffix cut recorded | `CUT` record (`cut_suffix`) | finished first, before any row below: `CLEAN` removed, later segments removed, the segment holding the offset truncated at the batch starting there and its index removed (rebuilt by scanning: a seal record from before the cut would vouch for the old length once a later segment exists), then the record removed; reported. A damaged record, or an offset inside a batch: error naming the record (`OpenError::CutRecord`), nothing changed (`recovery/cut.rs`) |
//! | closed cleanly | `CLEAN` record matches every file | nothing scanned, synced or written: the record's ends are trusted (`clean.rs`) |
//! | clean-close record stale or damaged | `CLEAN` record | record removed, then the rows below apply; reported as not trusted, with why |
//! | whole tail | last segment | nothing to cut; offsets continue after its last batch |
//! | torn header | recovered segment | fewer than 256 header bytes: cut at the batch, reported |
//! | torn frame | recovered segment | `batch_length` runs past the data, or frames fail their checksums: cut at the batch, reported |
//! | zero-filled tail | recovered segment | zeros after the last batch (preallocation, unwritten pages): cut there, reported |
//! | checksum mismatch, nothing whole after it | recovered segment | cut at the batch, reported |
//! | torn write, whole batches after it | recovered segment | cut at the torn batch; the whole batches after it (in the file and in later segments) moved to `aside/`, never deleted, reported |
//! | damage, whole batches after it | recovered segment | error naming file and position (`OpenError::DamageBeforeData`); nothing dropped; `repair` sets the tail aside |
//! | checksum mismatch | confirmed segment | error naming file and position; nothing dropped |
//! | cut in a segment before the last, later segments hold no whole batch | recovered segment | later segments removed, reported |
//! | a batch stamped for another partition | any segment | damage (never a torn write): error naming file and position |
//! | index past the end | any segment | entries past the data, or not naming the batch at their position, dropped; the index rewritten, reported |
//! | missing index | any segment | rebuilt by scanning the segment, reported |
//! | empty segment | last segment | an empty log continuing at the segment's base offset |
//! | offset gap between segments | confirmed segments | error naming the file |
//! | batches end elsewhere than the seal record says | confirmed segment | error naming file, position, the record's end and the batches' (`Damage::SealMismatch`); nothing dropped |
//! | batches stop short of the next segment's base | recovered segment before the last | the end of the log: cut there (`Damage::EndsShort`), later segments' whole batches set aside as after a torn write |
//! | temporary consumer offset file | `consumers/` | removed |
//! | torn consumer offset file (a power cut under `fsync=never`) | `consumers/` | not read at open; a read of it finds no offset and warns; the consumer's next store replaces it (the table of cases in `offsets.rs`) |
//! | damaged consumer offset file | `consumers/` | not read at open; reading it is an error naming it until a store replaces it |
//!
//! *Torn* means what a power cut leaves: zeros, a batch that runs past the
//! data, or a damaged batch holding a zero-filled sector (pages that never
//! reached the disk). Whole batches after a torn write were never
//! acknowledged under `fsync=batch`: the write before them was not durable,
//! and an acknowledgement waits for every earlier write and a sync after
//! it. They are kept all the same. Any other damage followed by whole
//! batches is corruption, and recovery refuses to guess.
//!
//! A cut truncates the file at the last whole batch and syncs it, so no
//! stale batch past the cut can ever be read back as a continuation.
//!
//! After a run that was poisoned by a failed write or sync (its directory
//! holds a `POISONED` marker), recovery does not trust the page cache: Linux
//! marks pages whose write-back failed clean, so a read finds them but no
//! fdatasync writes them. It rewrites every byte it recovers past a
//! segment's durable point (its last index entry) before syncing.

mod apply;
pub(crate) mod clean;
pub(crate) mod cut;
mod dry_run;
mod opened;
pub(crate) mod plan;
mod report;

pub use super::scan::CutReason;
pub use clean::CLEAN_RECORD;
pub use dry_run::{dry_run, DryRun};
pub use report::{CleanClose, RecoveryReport, SetAsideFile, TailCut};

use super::config::LogConfig;
use super::error::OpenError;
use super::index;
use super::map_slot::mapper;
use super::partition::PartitionLog;
use super::segment::{index_name, log_name, parse_log_name, Segment};
use super::sync::POISON_MARKER;
use crate::io::{Storage, StorageFile};
use opened::Opened;
pub use opened::ASIDE_DIR;
use plan::SegmentFacts;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

impl<S: Storage> PartitionLog<S> {
    /// Opens (creating if needed) the log of `partition` in `dir` (the
    /// partition's own directory) and recovers it: see [`recovery`](self).
    pub async fn open(
        storage: S,
        dir: impl Into<PathBuf>,
        partition: u64,
        config: LogConfig,
    ) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
        open(storage, dir.into(), partition, config, false).await
    }

    /// Opens the log like [`PartitionLog::open`], but where damage is
    /// followed by whole batches (which `open` refuses), cuts at the damage
    /// and moves everything after it to the partition's `aside/` directory:
    /// the explicit way past `OpenError::DamageBeforeData`. Nothing is
    /// deleted.
    pub async fn repair(
        storage: S,
        dir: impl Into<PathBuf>,
        partition: u64,
        config: LogConfig,
    ) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
        open(storage, dir.into(), partition, config, true).await
    }
}

async fn open<S: Storage>(
    storage: S,
    dir: PathBuf,
    partition: u64,
    config: LogConfig,
    force_set_aside: bool,
) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
    config
        .validate()
        .map_err(|reason| OpenError::InvalidConfig { reason })?;
    let mut prepared = prepare_dir(&storage, &dir).await?;
    let mut suffix_cut = None;
    if prepared.cut_record {
        let p = &prepared;
        let from = cut::finish(&storage, &dir, partition, &p.bases, p.clean_record).await?;
        suffix_cut = Some(from);
        prepared = prepare_dir(&storage, &dir).await?;
    }
    let Prepared {
        bases,
        after_poison,
        clean_record,
        cut_record: _,
    } = prepared;
    let mut clean_close = CleanClose::NotFound;
    if clean_record {
        let why = match clean::distrust(&config, force_set_aside, after_poison) {
            Some(why) => why,
            None => match clean::open_clean(&storage, &dir, partition, &config, &bases).await {
                Ok(opened) => return Ok(opened),
                Err(why) => why,
            },
        };
        clean_close = CleanClose::NotTrusted(why);
    }
    // Recovery may change the log: a record that was not trusted must not
    // outlive it. Removed once the plan stands (a refused open changes
    // nothing); the directory sync after recovery makes it durable.
    let remove_record = || -> Result<(), OpenError> {
        if clean_record {
            let path = dir.join(CLEAN_RECORD);
            storage
                .remove_file(&path)
                .map_err(|e| OpenError::io("remove", &path, e))?;
        }
        Ok(())
    };
    if bases.is_empty() {
        remove_record()?;
        let (log, mut report) = create_empty(storage, dir, partition, config).await?;
        report.clean_close = clean_close;
        report.suffix_cut = suffix_cut;
        return Ok((log, report));
    }
    // The files found may be names only the page cache holds (the process
    // died before a directory sync). Recovery serves what it finds and
    // writes seal records that vouch for the next segment's name, so make
    // the names durable first.
    storage
        .sync_dir(&dir)
        .await
        .map_err(|e| OpenError::io("directory sync", &dir, e))?;
    let capacity = usize::try_from(config.segment_capacity()).unwrap_or(usize::MAX);
    let mut opened = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let is_last = i + 1 == bases.len();
        opened.push(open_segment(&storage, &dir, base, is_last, capacity).await?);
    }
    let facts: Vec<SegmentFacts<'_>> = opened
        .iter()
        .map(|o| {
            let (stored_entries, seal) = index::decode_file(&o.stored);
            SegmentFacts {
                base: o.base,
                path: o.path.clone(),
                data: o.map.slice(0..o.len as usize).unwrap_or(&[]),
                stored_entries,
                seal,
            }
        })
        .collect();
    let plan = plan::plan(partition, &facts, &config, force_set_aside)?;
    remove_record()?;
    let ctx = apply::Context {
        storage: &storage,
        dir: &dir,
        after_poison,
        capacity,
        mapper: mapper(&storage),
    };
    let (segments, mut report) = apply::apply(&ctx, &opened, &facts, &plan).await?;
    let last_timestamp = segments.back().map_or(0, |s| s.last_timestamp);
    report.next_offset = segments.back().map_or(0, |s| s.next_offset);
    report.segments = segments.len();
    report.clean_close = clean_close;
    report.suffix_cut = suffix_cut;
    drop(facts);
    if after_poison {
        // Everything recovered is durable now.
        let marker = dir.join(POISON_MARKER);
        storage
            .remove_file(&marker)
            .map_err(|e| OpenError::io("remove", &marker, e))?;
    }
    if after_poison || clean_record {
        storage
            .sync_dir(&dir)
            .await
            .map_err(|e| OpenError::io("directory sync", &dir, e))?;
    }
    let log = PartitionLog::from_parts(storage, dir, partition, config, segments, last_timestamp);
    Ok((log, report))
}

/// What the partition's directory holds, once leftovers are cleared.
struct Prepared {
    /// The segments' base offsets, sorted.
    bases: Vec<u64>,
    /// A poisoned run left its marker.
    after_poison: bool,
    /// A clean close left its record.
    clean_record: bool,
    /// A suffix cut was recorded (and perhaps not finished).
    cut_record: bool,
}

/// Creates the directory if needed and clears leftovers (orphan indexes,
/// temporary files).
async fn prepare_dir<S: Storage>(storage: &S, dir: &Path) -> Result<Prepared, OpenError> {
    let existed = storage.list_dir(dir).is_ok();
    storage
        .create_dir_all(dir)
        .map_err(|e| OpenError::io("create directory", dir, e))?;
    if !existed {
        if let Some(parent) = dir.parent() {
            storage
                .sync_dir(parent)
                .await
                .map_err(|e| OpenError::io("directory sync", parent, e))?;
        }
    }
    let names = storage
        .list_dir(dir)
        .map_err(|e| OpenError::io("list", dir, e))?;
    let mut bases: Vec<u64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort_unstable();
    // A write or sync failed in an earlier run of this boot: the bytes it
    // could not write back may sit clean in the page cache, where reads find
    // them but no fdatasync writes them. Recovery rewrites what it reads past
    // each recovered segment's durable point before syncing it.
    let after_poison = names.iter().any(|n| n == POISON_MARKER);
    let clean_record = names.iter().any(|n| n == CLEAN_RECORD);
    let cut_record = names.iter().any(|n| n == super::cut::CUT_RECORD);
    // Index files whose segment is gone (a removal interrupted between
    // the two files) and temporary files are leftovers.
    let orphan = |n: &String| {
        n.strip_suffix(".index")
            .and_then(|b| parse_log_name(&format!("{b}.log")))
            .is_some_and(|b| !bases.contains(&b))
    };
    for n in names.iter().filter(|n| orphan(n) || n.ends_with(".tmp")) {
        let _ = storage.remove_file(&dir.join(n));
    }
    if let Ok(consumers) = storage.list_dir(&dir.join("consumers")) {
        for n in consumers.iter().filter(|n| n.ends_with(".tmp")) {
            let _ = storage.remove_file(&dir.join("consumers").join(n));
        }
    }
    Ok(Prepared {
        bases,
        after_poison,
        clean_record,
        cut_record,
    })
}

/// A new, empty log: its first segment created and its name made durable.
async fn create_empty<S: Storage>(
    storage: S,
    dir: PathBuf,
    partition: u64,
    config: LogConfig,
) -> Result<(PartitionLog<S>, RecoveryReport), OpenError> {
    let capacity = usize::try_from(config.segment_capacity()).unwrap_or(usize::MAX);
    let path = dir.join(log_name(0));
    let file = storage
        .open(&path, true)
        .map_err(|e| OpenError::io("create segment", &path, e))?;
    let map = file
        .map(capacity)
        .map_err(|e| OpenError::io("map", &path, e))?;
    storage
        .sync_dir(&dir)
        .await
        .map_err(|e| OpenError::io("directory sync", &dir, e))?;
    let seg = Segment::new(&dir, 0, Some(map), mapper(&storage), Some(file));
    let segments = VecDeque::from([seg]);
    let report = RecoveryReport {
        segments: 1,
        ..RecoveryReport::default()
    };
    let log = PartitionLog::from_parts(storage, dir, partition, config, segments, 0);
    Ok((log, report))
}

/// Opens and maps one segment file and reads its index file.
async fn open_segment<S: Storage>(
    storage: &S,
    dir: &Path,
    base: u64,
    is_last: bool,
    capacity: usize,
) -> Result<Opened<S::File>, OpenError> {
    let path = dir.join(log_name(base));
    let index_path = dir.join(index_name(base));
    let file = storage
        .open(&path, false)
        .map_err(|e| OpenError::io("open segment", &path, e))?;
    let len = file.len().map_err(|e| OpenError::io("stat", &path, e))?;
    let stored = match storage.open(&index_path, false) {
        Ok(f) => {
            let n = f.len().map_err(|e| OpenError::io("stat", &index_path, e))?;
            f.read_at(0, n as usize)
                .await
                .map_err(|e| OpenError::io("read", &index_path, e))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(OpenError::io("open index", &index_path, e)),
    };
    // The active segment is mapped at its full capacity (appends go on in
    // it); the others at their length.
    let map_len = if is_last {
        capacity.max(len as usize)
    } else {
        len as usize
    };
    let map = file
        .map(map_len)
        .map_err(|e| OpenError::io("map", &path, e))?;
    Ok(Opened {
        base,
        path,
        index_path,
        file,
        map,
        len,
        stored,
    })
}
