//! Whole-file writes (indexes).

use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::path::Path;

/// Writes a whole small file (an index) and trims it to its length.
pub(crate) async fn write_whole<S: Storage>(
    storage: &S,
    path: &Path,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let file = storage.open(path, true)?;
    let len = bytes.len() as u64;
    file.write_all_at(0, WriteBufs::one(Bytes::from(bytes)))
        .await?;
    if file.len()? > len {
        file.truncate(len).await?;
    }
    Ok(())
}
