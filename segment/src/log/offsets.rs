//! Stored consumer offsets.
//!
//! ```text
//! consumers/<consumer id, 20 digits>.offset   (32 bytes, little-endian)
//!   0 ..  8  magic "CLOGOFS1"
//!   8 .. 16  consumer id
//!  16 .. 24  offset
//!  24 .. 32  XXH3-64 of bytes 0..24
//! ```
//!
//! A store writes a temporary file and renames it over the old one, on the
//! shard's ring: a rename that replaces a file makes ext4 write the new
//! file's data back first (`auto_da_alloc`), which under a write load held
//! the shard's thread for 4 ms a store (median; up to 155 ms) when it was a
//! plain `rename(2)`. One rename, removal or read of a consumer's file runs
//! at a time, so a rename cannot land after a later delete. Under
//! `fsync=batch` and `interval` it syncs the temporary file before the
//! rename and the directory after it: a power cut leaves the old or the new
//! offset, never a damaged file. Under `fsync=never` it syncs neither (as
//! the messages themselves are not synced, and as Iggy skips the offset
//! file's fsync without `enforce_fsync`): a store costs no fdatasync, which
//! a consumer that auto-commits would otherwise pay on every poll, and a
//! power cut may lose a stored offset or leave the renamed file torn (the
//! rename reached the disk before the data). The first store of a run also
//! syncs the partition directory, which holds the `consumers` directory's
//! name.
//!
//! Reading an offset ([`PartitionLog::load_offset`], and so `poll_next`),
//! a table of cases:
//!
//! | case | what the file holds | what a read does |
//! |---|---|---|
//! | stored | 32 bytes, magic, this consumer's id, checksum matches | the offset |
//! | never stored, or deleted | no file | no offset |
//! | torn by a power cut under `fsync=never` | fewer than 32 bytes (often none), or 32 zero bytes | no offset (the consumer starts again from the partition's first message: redelivery, never loss); a warning names the file (once a run); the file stays until the consumer's next store replaces it (a read changes nothing on disk) |
//! | damaged | 32 bytes (or more) failing the magic, the id or the checksum | error naming the file (`Damage::OffsetFile`); storing an offset replaces it |
//! | a temporary file a crash left | `*.offset.<n>.tmp` | removed when the log is opened |
//!
//! A torn file is read as no offset rather than refused: under `fsync=never`
//! a power cut is expected to leave one, and refusing would stop the
//! consumer for good. Damage of any other shape is not what a crash leaves,
//! and a read refuses to guess.

use super::config::FsyncPolicy;
use super::error::{Damage, LogError};
use super::event::Event;
use super::partition::PartitionLog;
use crate::format::checksum::xxh3;
use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::path::PathBuf;
use std::rc::Rc;

const MAGIC: &[u8; 8] = b"CLOGOFS1";
const LEN: usize = 32;

/// Consumer keys from here to `u64::MAX` are an owner's own records (a
/// replica keeps its bookkeeping there): not counted against
/// `max_consumer_offsets`, never refused by it.
pub const FIRST_RESERVED_CONSUMER: u64 = u64::MAX - 255;

fn encode(consumer: u64, offset: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(LEN);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&consumer.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    let sum = xxh3(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// What an offset file holds, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// A valid record: the stored offset.
    Stored(u64),
    /// What a power cut leaves when the rename reached the disk before the
    /// data: fewer bytes than a record, or a record's worth of zeros.
    Torn,
    /// Anything else that is not this consumer's valid record.
    Damaged,
}

pub(crate) fn read_record(consumer: u64, b: &[u8]) -> Record {
    if let Some(offset) = decode(consumer, b) {
        return Record::Stored(offset);
    }
    if b.len() < LEN || (b.len() == LEN && b.iter().all(|&x| x == 0)) {
        return Record::Torn;
    }
    Record::Damaged
}

fn decode(consumer: u64, b: &[u8]) -> Option<u64> {
    if b.len() != LEN || &b[..8] != MAGIC {
        return None;
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    (word(24) == xxh3(&b[..24]) && word(8) == consumer).then(|| word(16))
}

impl<S: Storage> PartitionLog<S> {
    fn consumers_dir(&self) -> PathBuf {
        self.inner.dir.join("consumers")
    }

    fn offset_path(&self, consumer: u64) -> PathBuf {
        self.consumers_dir().join(format!("{consumer:020}.offset"))
    }

    /// Syncs the partition directory once per run, so that the `consumers`
    /// directory's name is durable before an offset stored in it is
    /// reported stored: a new directory's name lives in its parent, and
    /// only the parent's sync makes it durable. (Once per run, not once per
    /// creation: a crash may have come between an earlier run's creation
    /// and its sync.)
    async fn sync_consumers_name(&self) -> Result<(), LogError> {
        if self.inner.st.borrow().offsets.dir_durable {
            return Ok(());
        }
        let dir = &self.inner.dir;
        self.inner
            .storage
            .sync_dir(dir)
            .await
            .map_err(|e| LogError::io("directory sync", dir, e))?;
        self.inner.st.borrow_mut().offsets.dir_durable = true;
        Ok(())
    }

    /// Stores `offset` for `consumer` (the offset it has processed;
    /// [`PartitionLog::poll_next`] continues after it): durably, except
    /// under `fsync=never` (see the [module](self)).
    pub async fn store_offset(&self, consumer: u64, offset: u64) -> Result<(), LogError> {
        // Counted from here, so that stores of new consumers running side
        // by side (a replica applies entries that way) cannot pass the
        // limit together: the same entries refuse the same consumers on
        // every node.
        let reserved = self.admit_consumer(consumer)?;
        let stored = self.store_admitted(consumer, offset).await;
        if stored.is_err() && reserved {
            let mut st = self.inner.st.borrow_mut();
            let offsets = &mut st.offsets;
            if !offsets.cache.contains_key(&consumer) {
                if let Some(s) = offsets.stored.as_mut() {
                    s.remove(&consumer);
                }
            }
        }
        stored
    }

    async fn store_admitted(&self, consumer: u64, offset: u64) -> Result<(), LogError> {
        let storage = &self.inner.storage;
        let dir = self.consumers_dir();
        let _running = self.running(consumer);
        let seq = {
            let mut st = self.inner.st.borrow_mut();
            st.offsets.next_seq += 1;
            st.offsets.next_seq
        };
        storage
            .create_dir_all(&dir)
            .map_err(|e| LogError::io("create directory", &dir, e))?;
        self.sync_consumers_name().await?;
        let tmp = dir.join(format!("{consumer:020}.offset.{seq}.tmp"));
        let file = storage
            .open(&tmp, true)
            .map_err(|e| LogError::io("create", &tmp, e))?;
        file.write_all_at(0, WriteBufs::one(Bytes::from(encode(consumer, offset))))
            .await
            .map_err(|e| LogError::io("write", &tmp, e))?;
        let durable = self.inner.config.fsync != FsyncPolicy::Never;
        if durable {
            file.sync_data()
                .await
                .map_err(|e| LogError::io("fdatasync", &tmp, e))?;
        }
        let path = self.offset_path(consumer);
        let turn = self.offset_turn(consumer).await;
        if self.superseded(consumer, seq) {
            // A later store landed, or a delete came: this one is stale.
            drop(turn);
            let _ = storage.remove_file(&tmp);
            return Ok(());
        }
        // On the ring: a rename that replaces a file makes ext4 write the
        // new file's data back first, for milliseconds under a write load.
        if let Err(e) = storage.replace_file(&tmp, &path).await {
            drop(turn);
            let _ = storage.remove_file(&tmp);
            return Err(LogError::io("rename", &path, e));
        }
        if !self.superseded(consumer, seq) {
            let mut st = self.inner.st.borrow_mut();
            st.offsets.committed.insert(consumer, seq);
            st.offsets.cache.insert(consumer, offset);
            if let Some(stored) = st.offsets.stored.as_mut() {
                if consumer < FIRST_RESERVED_CONSUMER {
                    stored.insert(consumer);
                }
            }
        }
        // (A delete that came during the rename removes the file in its turn.)
        drop(turn);
        if durable {
            storage
                .sync_dir(&dir)
                .await
                .map_err(|e| LogError::io("directory sync", &dir, e))?;
        }
        Ok(())
    }

    /// Durably forgets `consumer`'s offset; returns whether there was one.
    /// A store still in flight when the delete starts is superseded by it
    /// (it cannot bring the offset back).
    pub async fn delete_offset(&self, consumer: u64) -> Result<bool, LogError> {
        let dir = self.consumers_dir();
        let path = self.offset_path(consumer);
        let _running = self.running(consumer);
        let seq = {
            let mut st = self.inner.st.borrow_mut();
            st.offsets.next_seq += 1;
            let seq = st.offsets.next_seq;
            st.offsets.committed.insert(consumer, seq);
            st.offsets.cache.remove(&consumer);
            seq
        };
        // After the rename of a store in flight, which this delete
        // supersedes.
        let turn = self.offset_turn(consumer).await;
        if self.superseded(consumer, seq) {
            // A store called after this delete has landed: its offset stays.
            return Ok(true);
        }
        let existed = match self.inner.storage.remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(LogError::io("remove", &path, e)),
        };
        if let Some(stored) = self.inner.st.borrow_mut().offsets.stored.as_mut() {
            stored.remove(&consumer);
        }
        drop(turn);
        if existed {
            self.inner
                .storage
                .sync_dir(&dir)
                .await
                .map_err(|e| LogError::io("directory sync", &dir, e))?;
        }
        Ok(existed)
    }

    /// The stored offset of `consumer`, if any. A torn offset file (what a
    /// power cut under `fsync=never` leaves) is read as none, with a
    /// warning, and left as it is (a store replaces it); a damaged one is an error naming it (see the
    /// [module](self)).
    pub async fn load_offset(&self, consumer: u64) -> Result<Option<u64>, LogError> {
        if let Some(o) = self.inner.st.borrow().offsets.cache.get(&consumer) {
            return Ok(Some(*o));
        }
        let _running = self.running(consumer);
        // No rename or removal of the file runs while it is read.
        let _turn = self.offset_turn(consumer).await;
        let changes_before = {
            let st = self.inner.st.borrow();
            if let Some(o) = st.offsets.cache.get(&consumer) {
                return Ok(Some(*o));
            }
            // Every landed store is cached, and only a delete uncaches: the
            // last change was a delete (its removal maybe still waiting for
            // its turn).
            if st.offsets.committed.contains_key(&consumer) {
                return Ok(None);
            }
            None
        };
        let path = self.offset_path(consumer);
        let file = match self.inner.storage.open(&path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io("open", &path, e)),
        };
        let bytes = file
            .read_at(0, LEN + 1)
            .await
            .map_err(|e| LogError::io("read", &path, e))?;
        let offset = match read_record(consumer, &bytes) {
            Record::Stored(offset) => offset,
            Record::Torn => {
                self.report_torn(consumer, &path, bytes.len());
                return Ok(None);
            }
            Record::Damaged => {
                return Err(LogError::Corrupt {
                    path,
                    position: 0,
                    damage: Damage::OffsetFile,
                })
            }
        };
        let mut st = self.inner.st.borrow_mut();
        // A store or delete that landed while this read ran wins.
        if st.offsets.committed.get(&consumer).copied() == changes_before {
            st.offsets.cache.insert(consumer, offset);
        }
        Ok(Some(offset))
    }

    /// Whether a store or delete called after the store `seq` has landed
    /// (stores) or begun (deletes).
    fn superseded(&self, consumer: u64, seq: u64) -> bool {
        let st = self.inner.st.borrow();
        st.offsets.committed.get(&consumer).copied().unwrap_or(0) > seq
    }

    /// Waits for `consumer`'s turn at its offset file: one rename, removal
    /// or read of it at a time, so that a rename running on the ring
    /// cannot land after a later removal, nor a read see a file a delete
    /// has already forgotten.
    async fn offset_turn(&self, consumer: u64) -> Turn<'_, S> {
        loop {
            let busy = {
                let mut st = self.inner.st.borrow_mut();
                match st.offsets.busy.get(&consumer) {
                    // (A set event whose turn is still listed was left by a
                    // turn that could not unlist itself: it is over.)
                    Some(done) if !done.is_set() => done.clone(),
                    _ => {
                        let done = Rc::new(Event::default());
                        st.offsets.busy.insert(consumer, done.clone());
                        return Turn {
                            log: self,
                            consumer,
                            done,
                        };
                    }
                }
            };
            busy.wait().await;
        }
    }

    /// Refuses a store that would give one consumer more than
    /// `max_consumer_offsets` an offset file; counts an admitted new one at
    /// once (`true`: it was new). The files are listed at the first store
    /// of this run: stores and deletes keep the set after.
    fn admit_consumer(&self, consumer: u64) -> Result<bool, LogError> {
        if consumer >= FIRST_RESERVED_CONSUMER {
            return Ok(false);
        }
        if self.inner.st.borrow().offsets.stored.is_none() {
            let dir = self.consumers_dir();
            let names = match self.inner.storage.list_dir(&dir) {
                Ok(names) => names,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(LogError::io("list", &dir, e)),
            };
            let stored = names
                .iter()
                .filter_map(|n| n.strip_suffix(".offset")?.parse::<u64>().ok())
                .filter(|c| *c < FIRST_RESERVED_CONSUMER)
                .collect();
            self.inner.st.borrow_mut().offsets.stored = Some(stored);
        }
        let mut st = self.inner.st.borrow_mut();
        let max = self.inner.config.max_consumer_offsets;
        let Some(stored) = st.offsets.stored.as_mut() else {
            return Ok(false);
        };
        if stored.contains(&consumer) {
            return Ok(false);
        }
        if stored.len() >= max {
            return Err(LogError::TooManyConsumers {
                partition: self.inner.partition,
                consumer,
                max,
            });
        }
        Ok(stored.insert(consumer))
    }

    /// Counts an operation on `consumer`'s offset as running until the
    /// guard is dropped; the last one to end forgets the consumer's
    /// `committed` entry.
    fn running(&self, consumer: u64) -> Running<'_, S> {
        *self
            .inner
            .st
            .borrow_mut()
            .offsets
            .running
            .entry(consumer)
            .or_insert(0) += 1;
        Running {
            log: self,
            consumer,
        }
    }

    /// Says (once per consumer in this run of the log) that `path` is
    /// torn. The file stays as it is: a read changes nothing on disk; the
    /// consumer's next store replaces it.
    fn report_torn(&self, consumer: u64, path: &std::path::Path, len: usize) {
        if !self
            .inner
            .st
            .borrow_mut()
            .offsets
            .torn_reported
            .insert(consumer)
        {
            return;
        }
        tracing::warn!(
            "{}: consumer offset file is torn ({len} of {LEN} bytes, or zeros): a power cut \
             under fsync=never left it before its data reached the disk; consumer {consumer} \
             has no stored offset and starts again from the partition's first message \
             (its next stored offset replaces the file)",
            path.display()
        );
    }
}

/// A consumer's turn at its offset file; ends when dropped, also when the
/// future holding it is.
struct Turn<'a, S: Storage> {
    log: &'a PartitionLog<S>,
    consumer: u64,
    done: Rc<Event>,
}

impl<S: Storage> Drop for Turn<'_, S> {
    fn drop(&mut self) {
        if let Ok(mut st) = self.log.inner.st.try_borrow_mut() {
            st.offsets.busy.remove(&self.consumer);
        }
        self.done.set();
    }
}

/// An operation on a consumer's offset, running (see
/// [`PartitionLog::running`]).
struct Running<'a, S: Storage> {
    log: &'a PartitionLog<S>,
    consumer: u64,
}

impl<S: Storage> Drop for Running<'_, S> {
    fn drop(&mut self) {
        let Ok(mut st) = self.log.inner.st.try_borrow_mut() else {
            return;
        };
        let offsets = &mut st.offsets;
        let Some(n) = offsets.running.get_mut(&self.consumer) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            offsets.running.remove(&self.consumer);
            offsets.committed.remove(&self.consumer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use crate::log::LogConfig;
    use std::collections::HashSet;

    /// A client may name ever new consumers in deletes, reads and stores:
    /// once they end, the log keeps nothing of them but the files (and the
    /// cache of the offsets those hold).
    #[test]
    fn consumers_named_once_leave_no_bookkeeping_behind() {
        let rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build();
        rt.expect("runtime").block_on(async {
            let disk = SimStorage::new(5, 1 << 20);
            let config = LogConfig {
                segment_bytes: 64 << 10,
                limits: crate::Limits {
                    max_batch_bytes: 64 << 10,
                },
                ..LogConfig::default()
            };
            let (log, _) = PartitionLog::open(disk, std::path::Path::new("/p"), 1, config)
                .await
                .expect("open");
            for c in 0..500 {
                assert!(!log.delete_offset(c).await.expect("delete"));
                assert_eq!(log.load_offset(1_000 + c).await.expect("load"), None);
            }
            for c in 0..20 {
                log.store_offset(2_000 + c, c).await.expect("store");
            }
            for c in 0..10 {
                assert!(log.delete_offset(2_000 + c).await.expect("delete"));
            }
            let st = log.inner.st.borrow();
            let o = &st.offsets;
            assert_eq!(
                (o.committed.len(), o.running.len(), o.busy.len()),
                (0, 0, 0),
                "bookkeeping left after every operation ended"
            );
            assert_eq!(o.cache.len(), 10, "the offsets of the 10 files left");
            assert_eq!(o.stored.as_ref().map(HashSet::len), Some(10));
        });
    }

    #[test]
    fn offset_files_detect_every_bit_flip_and_truncation() {
        let good = encode(7, 123_456);
        assert_eq!(decode(7, &good), Some(123_456));
        assert_eq!(decode(8, &good), None, "another consumer's file");
        for i in 0..good.len() * 8 {
            let mut b = good.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(decode(7, &b), None, "bit {i}");
        }
        for n in 0..good.len() {
            assert_eq!(decode(7, &good[..n]), None, "truncated to {n}");
        }
    }

    #[test]
    fn only_the_shapes_a_power_cut_leaves_read_as_torn() {
        let good = encode(7, 123_456);
        assert_eq!(read_record(7, &good), Record::Stored(123_456));
        for n in 0..good.len() {
            assert_eq!(read_record(7, &good[..n]), Record::Torn, "{n} bytes");
        }
        assert_eq!(read_record(7, &[0u8; LEN]), Record::Torn, "zeros");
        assert_eq!(read_record(8, &good), Record::Damaged, "another consumer's");
        let mut flipped = good.clone();
        flipped[17] ^= 4;
        assert_eq!(read_record(7, &flipped), Record::Damaged, "a flipped bit");
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(read_record(7, &longer), Record::Damaged, "a byte too many");
        assert_eq!(read_record(7, &[0u8; LEN + 1]), Record::Damaged, "33 zeros");
    }
}
