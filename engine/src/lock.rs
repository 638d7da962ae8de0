//! The data directory lock: `DIR/.lock`, held with flock for the engine's
//! lifetime; the holder writes its pid into it for the error message of
//! the next process that tries.
//!
//! What the storage layer relies on: while a `DirLock` is held, no other
//! process opens the directory's files through corelog, so nothing but this
//! process's own partition logs writes, truncates or removes them. The
//! segment mappings (`corelog_segment::io`) state this as the precondition
//! of their `unsafe` reads: a mapped segment is only shrunk or rewritten by
//! the one partition log that owns it, never by another process. The engine
//! takes the lock before it starts a shard and releases it only after every
//! shard has stopped; the CLI's read-only commands take it too.

use crate::error::OpenError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// A held directory lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir`, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, OpenError> {
        let path = dir.join(".lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| OpenError::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(OpenError::LockHeld {
                    dir: dir.to_path_buf(),
                    holder: text.trim().parse().ok(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(OpenError::io("lock", &path, e)),
        }
        let pid = std::process::id().to_string();
        let wrote = file
            .set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()));
        wrote.map_err(|e| OpenError::io("write lock file", &path, e))?;
        Ok(DirLock { _file: file })
    }

    /// Takes the lock shared, for a process that only reads the directory
    /// (`corelog poll`, `verify`, `dump`): several readers may hold it, no
    /// engine can start meanwhile, and nothing is written: not the pid, and
    /// no lock file is created where none exists (no engine ever held the
    /// directory then; the readers go without).
    pub fn acquire_shared(dir: &Path) -> Result<Option<DirLock>, OpenError> {
        let path = dir.join(".lock");
        let mut file = match OpenOptions::new().read(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if dir.is_dir() {
                    return Ok(None);
                }
                return Err(OpenError::io("open data directory", dir, e));
            }
            Err(e) => return Err(OpenError::io("open lock file", &path, e)),
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(DirLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                Err(OpenError::LockHeld {
                    dir: dir.to_path_buf(),
                    holder: text.trim().parse().ok(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => Err(OpenError::io("lock", &path, e)),
        }
    }
}
