//! Sealing a segment that reached `segment_bytes`, keeping an active
//! segment's index file up to date, and closing the log.

use super::config::FsyncPolicy;
use super::error::LogError;
use super::files::write_whole;
use super::index;
use super::partition::{release_idle_maps, PartitionLog, State};
use super::recovery::clean;
use super::segment::SegState;
use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::path::PathBuf;

impl<S: Storage> PartitionLog<S> {
    /// Writes the durable index entries of an active segment not yet in its
    /// index file.
    pub(super) async fn flush_index(&self, base: u64) {
        let (file, from, bytes, path) = {
            let mut st = self.inner.st.borrow_mut();
            let storage = self.inner.storage.clone();
            let Some(seg) = st.segment_mut(base) else {
                return;
            };
            if seg.index_flushing
                || seg.state != SegState::Active
                || seg.index_durable <= seg.index_written
            {
                return;
            }
            // Opened for this flush only (every INDEX_FLUSH_ENTRIES entries):
            // an idle partition holds one descriptor, its segment's.
            let file = match storage.open(&seg.index_path, true) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!("opening {}: {e}", seg.index_path.display());
                    return;
                }
            };
            seg.index_flushing = true;
            seg.index_synced = false;
            let from = seg.index_written;
            let bytes = index::encode_all(&seg.index[from..seg.index_durable]);
            (Some(file), from, bytes, seg.index_path.clone())
        };
        let n = bytes.len() / index::ENTRY_LEN;
        let result = match file {
            Some(f) => {
                f.write_all_at(
                    (from * index::ENTRY_LEN) as u64,
                    WriteBufs::one(Bytes::from(bytes)),
                )
                .await
            }
            None => Ok(()),
        };
        let mut st = self.inner.st.borrow_mut();
        if let Some(seg) = st.segment_mut(base) {
            seg.index_flushing = false;
            match result {
                Ok(()) => seg.index_written = seg.index_written.max(from + n),
                Err(e) => tracing::warn!("writing {}: {e}", path.display()),
            }
        }
    }

    /// Seals a segment: waits for its writes, makes it durable, then writes
    /// its whole index with the seal record.
    pub(super) async fn seal(&self, base: u64) {
        let inner = &self.inner;
        loop {
            let drained = {
                let st = inner.st.borrow();
                if st.poison.is_some() {
                    return;
                }
                let Some(seg) = st.segments.iter().find(|s| s.base_offset == base) else {
                    return;
                };
                if seg.pending_writes == 0 {
                    break;
                }
                seg.drained.clone()
            };
            drained.wait().await;
        }
        if inner.config.fsync == FsyncPolicy::Never {
            // Nothing waits for durability under `never`: let the kernel's
            // write-back make the segment durable first, so the sync that
            // confirms it finds little left to write. Syncing a whole dirty
            // segment at once held ext4's journal long enough to stall the
            // appends to the next segment for hundreds of milliseconds.
            let sleep = monoio::time::sleep(NEVER_CONFIRM_DELAY);
            let closing = inner.closing.wait();
            monoio::select! {
                _ = sleep => {},
                _ = closing => {},
            }
            // Only this segment and the directory: a round would also sync
            // the active segment's unsynced writes, the stall the wait above
            // avoids. Alone, as a round that syncs the directory is.
            if let Err((op, path, e)) = self.sync_alone(self.sync_sealed(base)).await {
                let mut st = inner.st.borrow_mut();
                self.poison(&mut st, op, path, e);
                return;
            }
            return self.write_seal(base).await;
        }
        // A sync round syncs every file with completed writes, and the
        // directory after a name changed: one started now covers this
        // segment's last writes and the next segment's name, which is all
        // the seal record vouches for (recovery takes a gap after a
        // confirmed segment for damage). So the seal waits for it instead
        // of syncing the segment and the directory itself, beside the round
        // that acknowledges the segment's last batch. On btrfs that pair
        // (each syncing the directory and the same file) lost the
        // acknowledged last batch of a segment in a power-cut clone: see
        // `sync.rs` and scripts/btrfs-fsync-race.sh.
        if self.rounds_cover().await.is_err() {
            return; // the failed round poisoned the log
        }
        self.write_seal(base).await
    }

    /// `fdatasync`s the segment at `base`, then syncs the directory (the
    /// next segment's name).
    async fn sync_sealed(&self, base: u64) -> Result<(), (&'static str, PathBuf, std::io::Error)> {
        let inner = &self.inner;
        let (file, path) = {
            let mut st = inner.st.borrow_mut();
            let Some(seg) = st.segment_mut(base) else {
                return Ok(());
            };
            (seg.writer.clone(), seg.log_path.clone())
        };
        if let Some(file) = &file {
            inner.st.borrow_mut().syncs += 1;
            file.sync_data()
                .await
                .map_err(|e| ("fdatasync (sealing)", path, e))?;
        }
        inner
            .storage
            .sync_dir(&inner.dir)
            .await
            .map_err(|e| ("directory sync (sealing)", inner.dir.clone(), e))
    }

    /// Once the segment at `base` and the next segment's name are durable:
    /// writes its whole index with the seal record and closes its writer.
    async fn write_seal(&self, base: u64) {
        let inner = &self.inner;
        let (bytes, index_path) = {
            let mut st = inner.st.borrow_mut();
            let Some(seg) = st.segment_mut(base) else {
                return;
            };
            let seal = index::Seal {
                data_len: seg.len,
                next_offset: seg.next_offset,
            };
            seg.index_durable = seg.index.len();
            seg.index_synced = false;
            (
                index::encode_sealed(&seg.index, seal),
                seg.index_path.clone(),
            )
        };
        if let Err(e) = write_whole(&inner.storage, &index_path, bytes).await {
            // The segment stays unconfirmed; recovery will verify it.
            tracing::warn!("sealing index {}: {e}", index_path.display());
        }
        let mut st = inner.st.borrow_mut();
        if let Some(seg) = st.segment_mut(base) {
            seg.state = SegState::Sealed;
            seg.index_written = seg.index.len();
            seg.writer = None;
        }
        release_idle_maps(&mut st.segments);
    }

    /// Stops taking appends, flushes, seals nothing more, writes the active
    /// segment's index and trims its preallocated tail so a reopen finds
    /// its exact end.
    ///
    /// Then it leaves the clean-close record that lets the next open skip
    /// recovery (see `recovery/clean.rs`); a log opened from its record and
    /// not changed since keeps it and closes without any I/O.
    pub async fn close(&self) -> Result<(), LogError> {
        let unchanged = {
            let mut st = self.inner.st.borrow_mut();
            st.closed = true;
            st.waiters.moved();
            st.clean_record
        };
        self.inner.closing.set();
        if unchanged {
            return Ok(());
        }
        self.flush().await?;
        // Let segments being sealed finish.
        loop {
            let pending = {
                let st = self.inner.st.borrow();
                st.segments
                    .iter()
                    .find(|s| s.state == SegState::Sealing)
                    .map(|s| s.drained.clone())
            };
            match pending {
                Some(ev) if !ev.is_set() => ev.wait().await,
                Some(_) => monoio::time::sleep(std::time::Duration::from_millis(1)).await,
                None => break,
            }
            if self.inner.st.borrow().poison.is_some() {
                break;
            }
        }
        let allocating = self
            .inner
            .st
            .borrow_mut()
            .segments
            .back_mut()
            .and_then(|s| s.prealloc.release());
        if let Some(done) = allocating {
            done.wait().await;
        }
        let active = {
            let mut st = self.inner.st.borrow_mut();
            st.segments.back_mut().map(|seg| {
                seg.index_durable = seg.index.len();
                seg.index_synced = false;
                (
                    seg.writer.clone(),
                    seg.len,
                    seg.index_path.clone(),
                    index::encode_all(&seg.index),
                )
            })
        };
        if let Some((Some(file), len, index_path, bytes)) = active {
            if file.len().map(|l| l > len).unwrap_or(false) {
                file.truncate(len)
                    .await
                    .map_err(|e| LogError::io("trim segment", &self.inner.dir, e))?;
            }
            if let Err(e) = write_whole(&self.inner.storage, &index_path, bytes).await {
                tracing::warn!("writing {}: {e}", index_path.display());
                return Ok(());
            }
        }
        if let Err(e) = self.record_clean_close().await {
            // The next open recovers by scanning, as after a crash.
            tracing::warn!(
                "partition {}: no clean-close record: {e}",
                self.inner.partition
            );
        }
        Ok(())
    }

    /// Makes every byte the log holds durable (the trimmed active segment,
    /// every index file not yet synced) and then writes the clean-close
    /// record.
    async fn record_clean_close(&self) -> std::io::Result<()> {
        let (active, index_paths, record) = {
            let st = self.inner.st.borrow();
            let all_sealed = st
                .segments
                .iter()
                .rev()
                .skip(1)
                .all(|s| s.state == SegState::Sealed);
            if st.poison.is_some() || !all_sealed || st.segments.is_empty() {
                return Ok(());
            }
            let last = st.segments.len() - 1;
            let index_bytes: Vec<Vec<u8>> = st
                .segments
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if i == last {
                        index::encode_all(&s.index)
                    } else {
                        let seal = index::Seal {
                            data_len: s.len,
                            next_offset: s.next_offset,
                        };
                        index::encode_sealed(&s.index, seal)
                    }
                })
                .collect();
            let described = clean::describe(&st.segments, &index_bytes);
            (
                st.segments.back().and_then(|s| s.writer.clone()),
                // Index files synced by an earlier close (or this one) and
                // not written since are durable already: a close costs the
                // same however many sealed segments the log holds.
                st.segments
                    .iter()
                    .filter(|s| !s.index_synced)
                    .map(|s| (s.base_offset, s.index_path.clone()))
                    .collect::<Vec<_>>(),
                clean::encode(self.inner.partition, &described),
            )
        };
        // The trim above changed the active segment's length: fdatasync
        // makes it durable with the data.
        if let Some(file) = active {
            file.sync_data().await?;
        }
        for (base, path) in index_paths {
            match self.inner.storage.open(&path, false) {
                Ok(f) => f.sync_data().await?,
                // A segment with no index file: the record's hash of no
                // bytes matches an empty read, never a missing file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            }
            // The log is closed: nothing writes this index file again.
            if let Some(seg) = self.inner.st.borrow_mut().segment_mut(base) {
                seg.index_synced = true;
            }
        }
        clean::write(&self.inner.storage, &self.inner.dir, record).await
    }

    /// The first change to a log opened from its clean-close record removes
    /// the record before it touches a file; the next sync round's directory
    /// sync makes the removal durable before anything is acknowledged.
    pub(super) fn leave_clean(&self, st: &mut State<S::File>) -> std::io::Result<()> {
        if st.clean_record {
            self.inner
                .storage
                .remove_file(&self.inner.dir.join(clean::CLEAN_RECORD))?;
            st.clean_record = false;
            st.names_dirty = true;
        }
        Ok(())
    }
}

/// How long a segment sealed under `FsyncPolicy::Never` waits for the
/// kernel's write-back (`vm.dirty_expire_centisecs`, 30 s by default) before
/// the fdatasync and seal record that confirm it. Until then it is recovered
/// like the active segment after a crash.
const NEVER_CONFIRM_DELAY: std::time::Duration = std::time::Duration::from_secs(30);
