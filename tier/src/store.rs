//! The object store seam: what a tier asks of a store. Blocking calls, made
//! only on the tier's own threads.

use crate::error::StoreError;
use std::io::Read;
use std::ops::Range;

/// An object listed under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its key, relative to the store's prefix.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An object store. Keys are relative to the store's own prefix.
pub trait ObjectStore: Send + Sync + std::fmt::Debug + 'static {
    /// What the store is, for messages (`s3://bucket/prefix at endpoint`).
    fn describe(&self) -> String;
    /// Where object `key` is, for messages (`s3://bucket/prefix/key`).
    fn object_name(&self, key: &str) -> String;
    /// Checks that the store answers, the bucket exists and the
    /// credentials are accepted.
    fn check(&self) -> Result<(), StoreError>;
    /// Stores `bytes` at `key`, replacing what was there (atomically).
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Stores `len` bytes read from `body` at `key`, streamed.
    fn put_reader(&self, key: &str, body: &mut dyn Read, len: u64) -> Result<(), StoreError>;
    /// The object's bytes, or `range` of them.
    fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Vec<u8>, StoreError>;
    /// `range` of the object's bytes written at the start of `buf` (at
    /// least as long as the range): how many there were, fewer where the
    /// object ends first. A store that can read a body straight into
    /// memory it is given says so here; the others copy what `get` gave.
    fn get_into(&self, key: &str, range: Range<u64>, buf: &mut [u8]) -> Result<usize, StoreError> {
        let got = self.get(key, Some(range))?;
        let n = got.len().min(buf.len());
        buf[..n].copy_from_slice(&got[..n]);
        Ok(n)
    }
    /// Removes the object (no error when it does not exist).
    fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Every object whose key starts with `prefix`.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError>;
}
