//! Small file helpers of the log: preallocation on the ring and whole-file
//! writes (indexes).

use super::event::Event;
use crate::io::{Storage, StorageFile, WriteBufs};
use bytes::Bytes;
use std::path::Path;
use std::rc::Rc;

/// Starts preallocating `file` to `len` bytes on the ring; the event is set
/// when it finished (failures only cost the metadata updates it saves).
pub(crate) fn preallocate<F: StorageFile>(file: &F, len: u64, path: &Path) -> Rc<Event> {
    let done = Rc::new(Event::default());
    let (f, d, p) = (file.clone(), done.clone(), path.to_path_buf());
    monoio::spawn(async move {
        if let Err(e) = f.allocate(len).await {
            tracing::warn!("preallocating {}: {e}", p.display());
        }
        d.set();
    });
    done
}

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
