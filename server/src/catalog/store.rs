//! The durable home of the [`Catalog`]: `DIR/iggy-metadata`.
//!
//! ```text
//! 0   magic      8 B  "CLSRVMD1"
//! 8   body_len   u64  little-endian
//! 16  checksum   u64  XXH3-64 of the body
//! 24  body       JSON of the catalog
//! ```
//!
//! Written whole to `iggy-metadata.tmp`, fsynced, renamed over the old
//! file, then the directory is fsynced: a crash leaves the old or the new
//! catalog, never a mix. Readers take a snapshot (`Arc`) and never wait for
//! a writer's I/O; writers are serialised by a lock that an async writer
//! awaits (it never blocks a shard's thread). The change itself is applied
//! in memory by the caller; encoding and the blocking file calls run on
//! the store's own thread, so a shard goes on serving its other
//! connections while the catalog is fsynced.

use crate::catalog::model::Catalog;
use crate::node::pool::BlockingPool;
use event_listener::Event;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

const MAGIC: &[u8; 8] = b"CLSRVMD1";
const PREFIX_LEN: usize = 24;
const FILE_NAME: &str = "iggy-metadata";

/// Why the catalog cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// An I/O call failed.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// what was being done
        op: &'static str,
        /// the file
        path: PathBuf,
        /// the error
        source: std::io::Error,
    },
    /// A replicated change was not made (see the `replica` crate).
    #[error("replication: {0}")]
    Replica(#[from] corelog_replica::ReplicaError),
    /// The file is not a whole, intact catalog.
    #[error("{path} is damaged: {damage}; restore it or move it away to start empty", path = path.display())]
    Damaged {
        /// the file
        path: PathBuf,
        /// what is wrong
        damage: Damage,
    },
}

/// What is wrong with a catalog file (or a replicated catalog body).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Damage {
    /// Shorter than the prefix.
    #[error("{len} bytes, shorter than its {PREFIX_LEN}-byte prefix")]
    Short {
        /// the file's length
        len: usize,
    },
    /// Not a catalog file.
    #[error("wrong magic")]
    Magic,
    /// The body is not the length the prefix gives.
    #[error("body is {body} bytes, prefix says {prefix}")]
    Length {
        /// the body's length
        body: u64,
        /// the prefix's
        prefix: u64,
    },
    /// The body is not what was written.
    #[error("checksum {stored:#018x} but the body hashes to {computed:#018x}")]
    Checksum {
        /// the prefix's
        stored: u64,
        /// the body's
        computed: u64,
    },
    /// The body is not a catalog.
    #[error("body: {0}")]
    Json(#[from] serde_json::Error),
}

/// The catalog, its file, the writer lock and the writer thread.
#[derive(Debug)]
pub struct MetadataStore {
    dir: PathBuf,
    current: RwLock<Arc<Catalog>>,
    writer: WriterLock,
    io: BlockingPool,
}

impl MetadataStore {
    /// Reads `dir/iggy-metadata`, or starts empty when there is none.
    pub fn open(dir: &Path) -> Result<MetadataStore, MetadataError> {
        let path = dir.join(FILE_NAME);
        let catalog = match std::fs::read(&path) {
            Ok(bytes) => decode(&bytes).map_err(|damage| MetadataError::Damaged {
                path: path.clone(),
                damage,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Catalog::default(),
            Err(source) => {
                return Err(MetadataError::Io {
                    op: "read",
                    path,
                    source,
                })
            }
        };
        let io = BlockingPool::new(1, "corelog-catalog").map_err(|source| MetadataError::Io {
            op: "start the catalog writer thread",
            path: dir.to_owned(),
            source,
        })?;
        Ok(MetadataStore {
            dir: dir.to_owned(),
            current: RwLock::new(Arc::new(catalog)),
            writer: WriterLock::default(),
            io,
        })
    }

    /// The catalog as of now.
    pub fn snapshot(&self) -> Arc<Catalog> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    #[cfg(test)]
    /// Applies `change` to a copy of the catalog, persists the copy, then
    /// publishes it. Nothing is published when `change` or the write fails.
    /// Blocks the calling thread for the write: for tools and tests; a
    /// shard uses [`MetadataStore::update_async`].
    pub fn update<T, E: From<MetadataError>>(
        &self,
        change: impl FnOnce(&mut Catalog) -> Result<T, E>,
    ) -> Result<T, E> {
        let _writer = self.writer.lock_blocking();
        let mut next = (*self.snapshot()).clone();
        let out = change(&mut next)?;
        persist(&self.dir, &encode(&next))?;
        self.publish(next);
        Ok(out)
    }

    /// `MetadataStore::update` (tests only) for a shard: waits for the writer lock
    /// without blocking its thread, applies `change` in memory, and awaits
    /// the write on the store's thread.
    pub async fn update_async<T, E: From<MetadataError>>(
        &self,
        change: impl FnOnce(&mut Catalog) -> Result<T, E>,
    ) -> Result<T, E> {
        let _writer = self.writer.lock().await;
        let mut next = (*self.snapshot()).clone();
        let out = change(&mut next)?;
        let dir = self.dir.clone();
        let written = self
            .io
            .run(move || {
                let written = persist(&dir, &encode(&next));
                (written, next)
            })
            .await;
        let Some((written, next)) = written else {
            return Err(MetadataError::Io {
                op: "write (the catalog writer thread has stopped)",
                path: self.dir.join(FILE_NAME),
                source: std::io::ErrorKind::BrokenPipe.into(),
            }
            .into());
        };
        written?;
        self.publish(next);
        Ok(out)
    }

    /// Persists `catalog` as it is and publishes it (a cluster's apply of
    /// a replicated change, or a snapshot's). Blocks the calling thread for
    /// the write.
    pub fn replace(&self, catalog: Catalog) -> Result<(), MetadataError> {
        let _writer = self.writer.lock_blocking();
        persist(&self.dir, &encode(&catalog))?;
        self.publish(catalog);
        Ok(())
    }

    fn publish(&self, next: Catalog) {
        match self.current.write() {
            Ok(mut c) => *c = Arc::new(next),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(next),
        }
    }
}

/// Temp file, fsync, rename, directory fsync.
fn persist(dir: &Path, bytes: &[u8]) -> Result<(), MetadataError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let io = |op, path: &Path| {
        let path = path.to_owned();
        move |source| MetadataError::Io { op, path, source }
    };
    // It holds password and token hashes: its owner's alone (0600), the
    // umask notwithstanding (`mode` applies only when the file is new, so
    // a leftover temporary file is set again).
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    f.write_all(bytes).map_err(io("write", &tmp))?;
    f.sync_all().map_err(io("fsync", &tmp))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io("rename", &path))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync directory", dir))
}

/// One writer at a time, across threads; an async writer waits without
/// blocking its thread.
#[derive(Debug, Default)]
struct WriterLock {
    held: AtomicBool,
    released: Event,
}

/// The lock, held until dropped.
struct WriterGuard<'a>(&'a WriterLock);

impl WriterLock {
    fn try_lock(&self) -> Option<WriterGuard<'_>> {
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| WriterGuard(self))
    }

    async fn lock(&self) -> WriterGuard<'_> {
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            let listener = self.released.listen();
            if let Some(g) = self.try_lock() {
                return g;
            }
            listener.await;
        }
    }

    fn lock_blocking(&self) -> WriterGuard<'_> {
        pollster::block_on(self.lock())
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
        self.0.released.notify(1);
    }
}

/// The catalog's body as replicated: its JSON.
pub fn encode_body(catalog: &Catalog) -> Vec<u8> {
    serde_json::to_vec(catalog).unwrap_or_default()
}

/// A replicated catalog body.
pub fn decode_body(body: &[u8]) -> Result<Catalog, serde_json::Error> {
    serde_json::from_slice(body)
}

fn encode(catalog: &Catalog) -> Vec<u8> {
    // A catalog of plain integers, strings and byte vectors always serialises.
    let body = serde_json::to_vec(catalog).unwrap_or_default();
    let mut out = Vec::with_capacity(PREFIX_LEN + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode(bytes: &[u8]) -> Result<Catalog, Damage> {
    let prefix = bytes
        .get(..PREFIX_LEN)
        .ok_or(Damage::Short { len: bytes.len() })?;
    if &prefix[..8] != MAGIC {
        return Err(Damage::Magic);
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&prefix[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let (len, stored) = (u64_at(8), u64_at(16));
    let body = &bytes[PREFIX_LEN..];
    if body.len() as u64 != len {
        return Err(Damage::Length {
            body: body.len() as u64,
            prefix: len,
        });
    }
    let computed = xxhash_rust::xxh3::xxh3_64(body);
    if computed != stored {
        return Err(Damage::Checksum { stored, computed });
    }
    Ok(serde_json::from_slice(body)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn refused() -> MetadataError {
        MetadataError::Damaged {
            path: PathBuf::new(),
            damage: Damage::Magic,
        }
    }

    #[test]
    fn an_async_update_writes_on_the_store_thread_while_its_caller_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(MetadataStore::open(dir.path()).expect("open"));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime");
        rt.block_on(async {
            // A slow disk: the store's thread is busy until released.
            let busy = {
                let s = store.clone();
                monoio::spawn(async move {
                    s.io.run(move || {
                        let _ = held.recv();
                    })
                    .await
                })
            };
            monoio::time::sleep(Duration::from_millis(20)).await;
            let update = {
                let s = store.clone();
                monoio::spawn(async move {
                    s.update_async(|c| c.add_stream("s", vec![1], 5).map_err(|_| refused()))
                        .await
                })
            };
            // This thread keeps running tasks meanwhile...
            monoio::time::sleep(Duration::from_millis(100)).await;
            // ...and the change is not published before its write.
            assert!(store.snapshot().streams.is_empty());
            release.send(()).expect("release");
            busy.await.expect("ran");
            update.await.expect("update");
        });
        assert_eq!(store.snapshot().streams.len(), 1);
        let again = MetadataStore::open(dir.path()).expect("reopen");
        assert_eq!(again.snapshot().streams[0].name, "s");
    }

    #[test]
    fn the_catalog_file_is_its_owners_alone_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MetadataStore::open(dir.path()).expect("open");
        // A leftover temporary file readable by all is not reused as is.
        let tmp = dir.path().join(format!("{FILE_NAME}.tmp"));
        std::fs::write(&tmp, b"old").expect("write");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        store
            .update(|c| c.add_stream("s", vec![], 5).map_err(|_| refused()))
            .expect("update");
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }

    #[test]
    fn survives_reopen_and_refuses_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MetadataStore::open(dir.path()).expect("open");
        store
            .update(|c| {
                c.add_stream("s", vec![1, 2], 5)
                    .map_err(|_| MetadataError::Damaged {
                        path: PathBuf::new(),
                        damage: Damage::Magic,
                    })
            })
            .expect("update");
        let again = MetadataStore::open(dir.path()).expect("reopen");
        assert_eq!(again.snapshot().streams[0].name, "s");

        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(matches!(
            MetadataStore::open(dir.path()),
            Err(MetadataError::Damaged { .. })
        ));
    }
}
