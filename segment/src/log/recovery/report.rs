//! What opening a log found and did, for the caller to show.

use super::super::scan::CutReason;
use std::path::PathBuf;

/// A cut made by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    /// The segment file.
    pub path: PathBuf,
    /// Where it was cut (the end of the last whole batch).
    pub position: u64,
    /// Bytes dropped from this file (set aside, when whole batches were
    /// among them: see [`RecoveryReport::set_aside`]).
    pub dropped: u64,
    /// Why.
    pub reason: CutReason,
}

/// A file (or a file's tail) that recovery moved out of the log, kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAsideFile {
    /// Where the bytes were.
    pub from: PathBuf,
    /// Where they are now.
    pub to: PathBuf,
    /// How many.
    pub bytes: u64,
}

/// What became of the clean-close record a log found (see `clean.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanClose {
    /// No record: the log was recovered by scanning.
    #[default]
    NotFound,
    /// The record was trusted: nothing scanned, nothing synced.
    Trusted,
    /// A record was found but not trusted (why); it was removed and the
    /// log recovered by scanning.
    NotTrusted(&'static str),
}

/// What opening a log found and did. New fields may be added.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Segments in the log after recovery.
    pub segments: usize,
    /// The next offset.
    pub next_offset: u64,
    /// Batches verified while opening.
    pub batches_verified: u64,
    /// A cut of a torn or damaged tail (one at most).
    pub cut: Option<TailCut>,
    /// Segment files removed because they followed a cut and held no whole
    /// batch.
    pub removed: Vec<PathBuf>,
    /// Whole batches that followed a torn tail, moved out of the log into
    /// the partition's `aside/` directory (never deleted).
    pub set_aside: Vec<SetAsideFile>,
    /// How many whole batches were set aside.
    pub set_aside_batches: u64,
    /// Index files rebuilt or trimmed.
    pub rebuilt_indexes: Vec<PathBuf>,
    /// Segments found whole whose sealing had been interrupted, now sealed.
    pub sealed: Vec<PathBuf>,
    /// Whether the log's clean-close record let the open skip recovery.
    pub clean_close: CleanClose,
    /// A recorded suffix cut this open finished: every message from this
    /// offset on was removed (see `PartitionLog::cut_suffix`).
    pub suffix_cut: Option<u64>,
}

impl RecoveryReport {
    /// Whether recovery changed what the log holds (cut, removed or set
    /// aside bytes): what a caller must tell its user about.
    pub fn changed_data(&self) -> bool {
        self.cut.is_some()
            || !self.removed.is_empty()
            || !self.set_aside.is_empty()
            || self.suffix_cut.is_some()
    }
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} segments, next offset {}, {} batches verified",
            self.segments, self.next_offset, self.batches_verified
        )?;
        if let Some(from) = self.suffix_cut {
            write!(
                f,
                "; finished the recorded cut of every message from offset {from}"
            )?;
        }
        if let Some(cut) = &self.cut {
            let why = match &cut.reason {
                CutReason::Zeros => "zero-filled tail".to_string(),
                CutReason::Damaged(d) => d.to_string(),
            };
            write!(
                f,
                "; cut {} at byte {} ({} bytes dropped: {why})",
                cut.path.display(),
                cut.position,
                cut.dropped
            )?;
        }
        for p in &self.removed {
            write!(
                f,
                "; removed {} (after the cut, no whole batch)",
                p.display()
            )?;
        }
        if !self.set_aside.is_empty() {
            write!(
                f,
                "; set aside {} whole batches that followed the torn tail",
                self.set_aside_batches
            )?;
            for s in &self.set_aside {
                write!(
                    f,
                    "; moved {} bytes of {} to {}",
                    s.bytes,
                    s.from.display(),
                    s.to.display()
                )?;
            }
        }
        for p in &self.rebuilt_indexes {
            write!(f, "; rebuilt {}", p.display())?;
        }
        for p in &self.sealed {
            write!(f, "; sealed {}", p.display())?;
        }
        match self.clean_close {
            CleanClose::NotFound => Ok(()),
            CleanClose::Trusted => write!(f, "; closed cleanly: nothing scanned"),
            CleanClose::NotTrusted(why) => {
                write!(
                    f,
                    "; clean-close record not trusted ({why}): recovered by scanning"
                )
            }
        }
    }
}
