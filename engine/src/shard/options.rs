//! A partition's options file, in its directory: written whole by its
//! shard (a temporary file, synced, renamed over the old, the directory
//! synced), read whenever the partition opens.

use super::{Shard, Slot};
use crate::error::RequestError;
use crate::partition_options::{PartitionOptions, OPTIONS_FILE};
use corelog_segment::io::{Storage, StorageFile, UringStorage, WriteBufs};
use corelog_segment::log::{LogConfig, OpenError as LogOpenError, Retention};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// The largest options file read (they are a few hundred bytes).
const MAX_OPTIONS_BYTES: usize = 64 << 10;

impl Shard {
    /// What partition `p` opens with: the engine's log settings with its
    /// options over them, and a retention set since that its file lacks. An unreadable or damaged
    /// options file leaves the partition unopenable (its fsync policy
    /// unknown, it is not opened with a weaker one), naming the file.
    pub(super) async fn partition_config(
        &self,
        p: u64,
    ) -> Result<(LogConfig, Option<Retention>), LogOpenError> {
        let path = self.dir.join(p.to_string()).join(OPTIONS_FILE);
        let options = match read_options(&self.storage, &path).await {
            Ok(o) => o.unwrap_or_default(),
            Err(e) => return Err(open_error("read partition options", path, e)),
        };
        // A limit set while the engine runs (and not yet kept) wins.
        let retention = self.retention.borrow().get(&p).copied();
        Ok((options.apply(&self.config), retention))
    }

    /// Writes partition `p`'s options file (creating its directory); on
    /// failure, the file and why.
    pub(super) async fn write_options(
        &self,
        p: u64,
        options: &PartitionOptions,
    ) -> Result<(), (PathBuf, io::Error)> {
        let dir = self.dir.join(p.to_string());
        write_options(&self.storage, &dir, options)
            .await
            .map_err(|e| (dir.join(OPTIONS_FILE), e))
    }

    /// Keeps a retention set while the engine runs in partition `p`'s
    /// options file, when `p` exists on disk (one that does not yet gets it
    /// when it opens, from memory), then answers.
    pub(super) fn keep_retention(
        self: &Rc<Self>,
        p: u64,
        retention: Retention,
        reply: crate::request::Respond<()>,
    ) {
        let exists = matches!(
            self.partitions.borrow().get(&p),
            Some(Slot::Open(_) | Slot::OnDisk | Slot::Opening(_) | Slot::Closing(_))
        );
        if !exists {
            let _ = reply.send(Ok(()));
            return;
        }
        let shard = self.clone();
        self.spawn_tracked(async move {
            let r = match shard.options_of(p).await {
                Ok(mut o) => {
                    o.retention = Some(retention);
                    shard
                        .write_options(p, &o)
                        .await
                        .map_err(|(path, e)| RequestError::io("write partition options", path, e))
                }
                Err(e) => Err(e),
            };
            let _ = reply.send(r);
        });
    }

    /// Partition `p`'s options as its file says (none set if it has none).
    pub(super) async fn options_of(&self, p: u64) -> Result<PartitionOptions, RequestError> {
        let path = self.dir.join(p.to_string()).join(OPTIONS_FILE);
        match read_options(&self.storage, &path).await {
            Ok(o) => Ok(o.unwrap_or_default()),
            Err(e) => Err(RequestError::io("read partition options", path, e)),
        }
    }
}

async fn read_options(storage: &UringStorage, path: &Path) -> io::Result<Option<PartitionOptions>> {
    let file = match storage.open(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bytes = file.read_at(0, MAX_OPTIONS_BYTES).await?;
    PartitionOptions::decode(&bytes)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

async fn write_options(
    storage: &UringStorage,
    dir: &Path,
    options: &PartitionOptions,
) -> io::Result<()> {
    let existed = storage.list_dir(dir).is_ok();
    storage.create_dir_all(dir)?;
    if !existed {
        if let Some(parent) = dir.parent() {
            storage.sync_dir(parent).await?;
        }
    }
    let tmp = dir.join(format!("{OPTIONS_FILE}.tmp"));
    let bytes = options.encode();
    let len = bytes.len() as u64;
    let file = storage.open(&tmp, true)?;
    file.write_all_at(0, WriteBufs::one(bytes.into())).await?;
    if file.len()? > len {
        file.truncate(len).await?;
    }
    file.sync_data().await?;
    storage.replace_file(&tmp, &dir.join(OPTIONS_FILE)).await?;
    storage.sync_dir(dir).await
}

/// An options file's failure as the error of the partition's open.
pub(super) fn open_error(op: &'static str, path: PathBuf, e: io::Error) -> LogOpenError {
    LogOpenError::Io {
        op,
        path,
        source: Arc::new(e),
    }
}
