//! Doing what the plan says: cuts, set-asides, removals, index rewrites,
//! seals; then the segments the log starts with.

use super::super::error::OpenError;
use super::super::files::write_whole;
use super::super::index::{self, IndexEntry};
use super::super::map_slot::Mapper;
use super::super::prealloc::Prealloc;
use super::super::scan::Scan;
use super::super::segment::{SegState, Segment};
use super::opened::{Opened, ASIDE_DIR};
use super::plan::{Plan, SegmentFacts, SegmentPlan, SetAside, Step};
use super::report::{RecoveryReport, SetAsideFile, TailCut};
use crate::io::{Mapping, Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// What applying a plan needs besides the plan.
pub(super) struct Context<'a, S> {
    pub storage: &'a S,
    pub dir: &'a Path,
    pub after_poison: bool,
    pub capacity: usize,
    /// Maps sealed segments on demand; one for the partition's segments.
    pub mapper: Mapper,
}

/// Applies `plan` to the `opened` segment files (whose bytes `facts`
/// hold); returns the log's segments and what was done.
pub(super) async fn apply<S: Storage>(
    ctx: &Context<'_, S>,
    opened: &[Opened<S::File>],
    facts: &[SegmentFacts<'_>],
    plan: &Plan,
) -> Result<(VecDeque<Segment<S::File>>, RecoveryReport), OpenError> {
    let mut report = RecoveryReport::default();
    let mut segments = VecDeque::new();
    for sp in &plan.segments {
        let o = &opened[sp.segment];
        let f = &facts[sp.segment];
        report.batches_verified += sp.found.batches;
        if sp.index_rewritten {
            report.rebuilt_indexes.push(o.index_path.clone());
        }
        let start_ts = segments
            .back()
            .map_or(0, |s: &Segment<S::File>| s.last_timestamp);
        match &sp.step {
            Step::Trusted { seal } => {
                if sp.index_rewritten {
                    write_index(ctx, &o.index_path, index::encode_sealed(&sp.entries, *seal))
                        .await?;
                }
                segments.push_back(sealed_segment(ctx.dir, o, sp, start_ts, ctx.mapper.clone()));
            }
            Step::SealNow => {
                rewrite_if_poisoned(ctx, o, f.data, sp).await?;
                // Sealing was interrupted after the data was complete: make
                // it durable and seal it now.
                o.file
                    .sync_data()
                    .await
                    .map_err(|e| OpenError::io("fdatasync", &o.path, e))?;
                let seal = index::Seal {
                    data_len: sp.found.end,
                    next_offset: sp.found.next_offset,
                };
                write_index(ctx, &o.index_path, index::encode_sealed(&sp.entries, seal)).await?;
                report.sealed.push(o.path.clone());
                segments.push_back(sealed_segment(ctx.dir, o, sp, start_ts, ctx.mapper.clone()));
            }
            Step::Last { cut } => {
                rewrite_if_poisoned(ctx, o, f.data, sp).await?;
                if let Some(aside) = &plan.set_aside {
                    set_aside(ctx, opened, facts, aside, &mut report).await?;
                }
                if let Some(cut) = cut {
                    if cut.position < o.len {
                        o.file
                            .truncate(cut.position)
                            .await
                            .map_err(|e| OpenError::io("truncate", &o.path, e))?;
                    }
                    report.cut = Some(TailCut {
                        path: o.path.clone(),
                        position: cut.position,
                        dropped: o.len - cut.position,
                        reason: cut.reason.clone(),
                    });
                }
                for &k in &plan.remove {
                    let later = &opened[k];
                    ctx.storage
                        .remove_file(&later.path)
                        .map_err(|e| OpenError::io("remove segment", &later.path, e))?;
                    let _ = ctx.storage.remove_file(&later.index_path);
                    report.removed.push(later.path.clone());
                }
                if !plan.remove.is_empty() {
                    sync_dir(ctx, ctx.dir).await?;
                }
                segments.push_back(active_segment(ctx, o, sp, start_ts).await?);
            }
        }
    }
    Ok((segments, report))
}

/// After a poisoned run: rewrites the bytes recovered past the segment's
/// durable point (see the module doc).
async fn rewrite_if_poisoned<S: Storage>(
    ctx: &Context<'_, S>,
    o: &Opened<S::File>,
    data: &[u8],
    sp: &SegmentPlan,
) -> Result<(), OpenError> {
    if !ctx.after_poison {
        return Ok(());
    }
    let (from, to) = (sp.from.position, sp.found.end);
    let Some(bytes) = data
        .get(from as usize..to as usize)
        .filter(|b| !b.is_empty())
    else {
        return Ok(());
    };
    o.file
        .write_all_at(from, WriteBufs::one(Bytes::copy_from_slice(bytes)))
        .await
        .map_err(|e| OpenError::io("rewrite after a failed sync", &o.path, e))
}

/// Moves whole batches that follow a torn tail out of the log: the tail's
/// bytes are copied to a file in `aside/` (the caller then cuts the
/// segment), later segment files are renamed into it. Durable before the
/// log changes: the copies are synced, and so is `aside/`.
async fn set_aside<S: Storage>(
    ctx: &Context<'_, S>,
    opened: &[Opened<S::File>],
    facts: &[SegmentFacts<'_>],
    aside: &SetAside,
    report: &mut RecoveryReport,
) -> Result<(), OpenError> {
    let dir = ctx.dir.join(ASIDE_DIR);
    ctx.storage
        .create_dir_all(&dir)
        .map_err(|e| OpenError::io("create directory", &dir, e))?;
    let taken = ctx.storage.list_dir(&dir).map(|v| v.len()).unwrap_or(0);
    let name = |i: usize, what: &str| dir.join(format!("{:04}-{what}", taken + i));
    if let Some((k, from)) = aside.tail {
        let o = &opened[k];
        let bytes = facts[k].data.get(from as usize..).unwrap_or(&[]);
        let to = name(0, &format!("{}.from-{from}", file_name(&o.path)));
        let file = ctx
            .storage
            .open(&to, true)
            .map_err(|e| OpenError::io("create", &to, e))?;
        file.write_all_at(0, WriteBufs::one(Bytes::copy_from_slice(bytes)))
            .await
            .map_err(|e| OpenError::io("write", &to, e))?;
        file.sync_data()
            .await
            .map_err(|e| OpenError::io("fdatasync", &to, e))?;
        report.set_aside.push(SetAsideFile {
            from: o.path.clone(),
            to,
            bytes: bytes.len() as u64,
        });
    }
    for (i, &k) in aside.later.iter().enumerate() {
        let o = &opened[k];
        let to = name(i + 1, &file_name(&o.path));
        ctx.storage
            .rename(&o.path, &to)
            .map_err(|e| OpenError::io("move aside", &o.path, e))?;
        let _ = ctx.storage.remove_file(&o.index_path);
        report.set_aside.push(SetAsideFile {
            from: o.path.clone(),
            to,
            bytes: o.len,
        });
    }
    report.set_aside_batches = aside.whole_batches;
    sync_dir(ctx, &dir).await?;
    sync_dir(ctx, ctx.dir).await
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The segment appends go on in: durable as recovered, its index written
/// if it changed, remapped at full capacity if it was not the last file.
async fn active_segment<S: Storage>(
    ctx: &Context<'_, S>,
    o: &Opened<S::File>,
    sp: &SegmentPlan,
    start_ts: u64,
) -> Result<Segment<S::File>, OpenError> {
    // What was read back may still be only in the page cache (after a
    // process crash): make it durable before index entries point at it.
    o.file
        .sync_data()
        .await
        .map_err(|e| OpenError::io("fdatasync", &o.path, e))?;
    let map = if o.map.capacity() >= ctx.capacity {
        o.map.clone()
    } else {
        o.file
            .map(ctx.capacity)
            .map_err(|e| OpenError::io("map", &o.path, e))?
    };
    if sp.index_rewritten {
        write_index(ctx, &o.index_path, index::encode_all(&sp.entries)).await?;
    }
    let mut seg = Segment::new(
        ctx.dir,
        o.base,
        Some(map),
        ctx.mapper.clone(),
        Some(o.file.clone()),
    );
    fill(&mut seg, &sp.found, sp.entries.clone(), start_ts);
    seg.state = SegState::Active;
    seg.index_durable = seg.index.len();
    seg.index_written = seg.index.len();
    // Preallocation resumes with the next append, a step at a time.
    seg.prealloc = Prealloc::at(sp.found.end);
    Ok(seg)
}

/// A sealed segment keeps the mapping recovery read it through until the
/// open gives back all but the few a partition keeps (see `map_slot.rs`).
fn sealed_segment<F>(
    dir: &Path,
    o: &Opened<F>,
    sp: &SegmentPlan,
    start_ts: u64,
    mapper: Mapper,
) -> Segment<F> {
    let map: Mapping = o.map.clone();
    let mut seg = Segment::new(dir, o.base, Some(map), mapper, None);
    fill(&mut seg, &sp.found, sp.entries.clone(), start_ts);
    seg.state = SegState::Sealed;
    seg.index_durable = seg.index.len();
    seg.index_written = seg.index.len();
    seg.drained.set();
    seg
}

pub(super) fn fill<F>(seg: &mut Segment<F>, found: &Scan, entries: Vec<IndexEntry>, start_ts: u64) {
    seg.len = found.end;
    seg.next_offset = found.next_offset;
    seg.last_batch = found.last_batch;
    seg.last_timestamp = found.last_timestamp.max(start_ts);
    seg.first_timestamp = entries.first().map(|e| e.timestamp);
    seg.last_indexed = entries.last().map(|e| u64::from(e.position));
    seg.index = entries;
    seg.visible = seg.fully_visible();
}

async fn write_index<S: Storage>(
    ctx: &Context<'_, S>,
    path: &PathBuf,
    bytes: Vec<u8>,
) -> Result<(), OpenError> {
    write_whole(ctx.storage, path, bytes)
        .await
        .map_err(|e| OpenError::io("write index", path, e))
}

async fn sync_dir<S: Storage>(ctx: &Context<'_, S>, dir: &Path) -> Result<(), OpenError> {
    ctx.storage
        .sync_dir(dir)
        .await
        .map_err(|e| OpenError::io("directory sync", dir, e))
}
