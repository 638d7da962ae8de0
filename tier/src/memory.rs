//! An object store in memory, for tests: it can be taken down, made to
//! refuse the PUTs of some keys, and have an object's bytes damaged.

use crate::error::StoreError;
use crate::store::{ObjectInfo, ObjectStore};
use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// An in-memory [`ObjectStore`] with faults.
#[derive(Debug)]
pub struct MemoryStore {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
    down: AtomicBool,
    /// PUTs still served before they fail (`u64::MAX`: no limit).
    puts_left: AtomicU64,
    refuse_puts_ending: Mutex<Option<String>>,
    puts: AtomicU64,
    gets: AtomicU64,
}

impl Default for MemoryStore {
    fn default() -> MemoryStore {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore {
            objects: Mutex::default(),
            down: AtomicBool::new(false),
            puts_left: AtomicU64::new(u64::MAX),
            refuse_puts_ending: Mutex::default(),
            puts: AtomicU64::new(0),
            gets: AtomicU64::new(0),
        }
    }

    /// The next `n` PUTs are served, later ones fail (`None`: no limit).
    pub fn fail_puts_after(&self, n: Option<u64>) {
        self.puts_left
            .store(n.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Every request fails as unreachable while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// PUTs of keys ending with `suffix` fail (`None`: none do).
    pub fn refuse_puts_ending(&self, suffix: Option<&str>) {
        *self.lock_refuse() = suffix.map(str::to_owned);
    }

    /// Flips the bits of the byte at `pos` of object `key`; false when
    /// there is no such byte.
    pub fn damage(&self, key: &str, pos: usize) -> bool {
        match self.lock().get_mut(key).and_then(|o| o.get_mut(pos)) {
            Some(b) => {
                *b ^= 0xff;
                true
            }
            None => false,
        }
    }

    /// The keys held.
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// PUTs and GETs served so far.
    pub fn requests(&self) -> (u64, u64) {
        (
            self.puts.load(Ordering::Relaxed),
            self.gets.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_refuse(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.refuse_puts_ending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn up(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unreachable {
                store: self.describe(),
                reason: "taken down by the test".into(),
            });
        }
        Ok(())
    }
}

impl ObjectStore for MemoryStore {
    fn describe(&self) -> String {
        "memory://".into()
    }

    fn object_name(&self, key: &str) -> String {
        format!("memory://{key}")
    }

    fn check(&self) -> Result<(), StoreError> {
        self.up()
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.up()?;
        if let Some(suffix) = self.lock_refuse().as_deref() {
            if key.ends_with(suffix) {
                return Err(StoreError::Failed {
                    store: self.describe(),
                    op: "PUT",
                    key: key.into(),
                    status: 503,
                    message: "refused by the test".into(),
                });
            }
        }
        let left = self.puts_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(StoreError::Failed {
                store: self.describe(),
                op: "PUT",
                key: key.into(),
                status: 500,
                message: "the test's PUT limit".into(),
            });
        }
        if left != u64::MAX {
            self.puts_left.store(left - 1, Ordering::SeqCst);
        }
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(key.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn put_reader(&self, key: &str, body: &mut dyn Read, len: u64) -> Result<(), StoreError> {
        let mut bytes = Vec::with_capacity(len as usize);
        body.take(len)
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::Unreachable {
                store: self.describe(),
                reason: format!("reading the body: {e}"),
            })?;
        self.put(key, &bytes)
    }

    fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Vec<u8>, StoreError> {
        self.up()?;
        self.gets.fetch_add(1, Ordering::Relaxed);
        let objects = self.lock();
        let o = objects.get(key).ok_or_else(|| StoreError::NotFound {
            store: self.describe(),
            key: key.into(),
        })?;
        let r = range.unwrap_or(0..o.len() as u64);
        let end = (r.end as usize).min(o.len());
        let start = (r.start as usize).min(end);
        Ok(o[start..end].to_vec())
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.up()?;
        self.lock().remove(key);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.up()?;
        Ok(self
            .lock()
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| ObjectInfo {
                key: k.clone(),
                size: v.len() as u64,
            })
            .collect())
    }
}
