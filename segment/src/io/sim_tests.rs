//! The simulated disk's own tests: it is as strict as a disk.

use super::*;
use std::cell::Cell;

fn run<F: Future>(f: F) -> F::Output {
    monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .build()
        .expect("legacy runtime")
        .block_on(f)
}

fn bufs(b: &[u8]) -> WriteBufs {
    WriteBufs::one(bytes::Bytes::copy_from_slice(b))
}

/// What `path` holds after each of `n` power cuts (`None`: gone).
fn after_cuts(disk: &SimStorage, path: &Path, n: usize) -> Vec<Option<Vec<u8>>> {
    (0..n).map(|_| disk.crash().file_bytes(path)).collect()
}

/// A new disk with a durable directory `/d`.
async fn disk_with_dir() -> SimStorage {
    let disk = SimStorage::new(7, 4096);
    disk.create_dir_all(Path::new("/d")).unwrap();
    disk.sync_dir(Path::new("/")).await.unwrap();
    disk
}

/// Starts `op` as a task that stays in its yields, and runs it up to
/// its first one; `done` tells whether it finished.
async fn start_slow<F>(disk: &SimStorage, op: F) -> (monoio::task::JoinHandle<()>, Rc<Cell<bool>>)
where
    F: Future<Output = io::Result<()>> + 'static,
{
    disk.set_faults(SimFaults {
        max_yields: 1000,
        ..SimFaults::default()
    });
    let done = Rc::new(Cell::new(false));
    let task = monoio::spawn({
        let done = done.clone();
        async move {
            op.await.unwrap();
            done.set(true);
        }
    });
    Yield(1).await;
    disk.set_faults(SimFaults::default());
    (task, done)
}

/// fdatasync covers the writes that completed before it was called: one
/// completing while it runs stays unsynced, and a power cut may lose it.
#[test]
fn a_sync_covers_only_writes_completed_before_it_started() {
    run(async {
        let disk = disk_with_dir().await;
        let path = Path::new("/d/f");
        let f = disk.open(path, true).unwrap();
        disk.sync_dir(Path::new("/d")).await.unwrap();
        f.write_all_at(0, bufs(b"before")).await.unwrap();
        let (sync, done) = start_slow(&disk, {
            let f = f.clone();
            async move { f.sync_data().await }
        })
        .await;
        f.write_all_at(6, bufs(b"during")).await.unwrap();
        assert!(!done.get(), "the write completed while the sync ran");
        sync.await;
        let cuts = after_cuts(&disk, path, 64);
        assert!(
            cuts.iter()
                .all(|c| c.as_deref().map(|b| &b[..6]) == Some(b"before")),
            "the write before the sync is durable"
        );
        assert!(
            cuts.iter().any(|c| c.as_deref() != Some(b"beforeduring")),
            "the write completed during the sync must be able to vanish in a power cut"
        );
    });
}

/// A new directory is an entry of its parent: until the parent is
/// synced, a power cut may lose it and everything in it, even files
/// whose data and names (in the new directory) were synced.
#[test]
fn a_new_directory_is_durable_only_once_its_parent_is_synced() {
    run(async {
        let disk = disk_with_dir().await;
        let sub = Path::new("/d/sub");
        let path = sub.join("f");
        disk.create_dir_all(sub).unwrap();
        let f = disk.open(&path, true).unwrap();
        f.write_all_at(0, bufs(b"data")).await.unwrap();
        f.sync_data().await.unwrap();
        let cuts = after_cuts(&disk, &path, 64);
        assert!(
            cuts.iter().any(|c| c.is_none()),
            "a synced file whose name was never synced can vanish"
        );
        disk.sync_dir(sub).await.unwrap();
        let cuts = after_cuts(&disk, &path, 64);
        assert!(
            cuts.iter().any(|c| c.is_none()),
            "a file in a new directory whose parent was never synced can vanish"
        );
        disk.sync_dir(Path::new("/d")).await.unwrap();
        let cuts = after_cuts(&disk, &path, 64);
        assert!(
            cuts.iter().all(|c| c.as_deref() == Some(b"data")),
            "once the parent is synced, the directory and the file are durable"
        );
    });
}

/// A directory sync covers the entries made before it was called, not
/// one created while it runs.
#[test]
fn a_directory_sync_covers_only_names_made_before_it_started() {
    run(async {
        let disk = disk_with_dir().await;
        let path = Path::new("/d/f");
        let (sync, done) = start_slow(&disk, {
            let disk = disk.clone();
            async move { disk.sync_dir(Path::new("/d")).await }
        })
        .await;
        let f = disk.open(path, true).unwrap();
        f.write_all_at(0, bufs(b"data")).await.unwrap();
        f.sync_data().await.unwrap();
        assert!(!done.get(), "the file was created while the sync ran");
        sync.await;
        assert!(
            after_cuts(&disk, path, 64).iter().any(|c| c.is_none()),
            "a name made during the directory sync must be able to vanish"
        );
    });
}

/// A mapping has no bytes past the end of the file (a real one would
/// fault): `slice` answers `None` there, after growth, and after a
/// truncation.
#[test]
fn a_mapping_has_no_bytes_past_the_end_of_the_file() {
    run(async {
        let disk = disk_with_dir().await;
        let f = disk.open(Path::new("/d/f"), true).unwrap();
        f.write_all_at(0, bufs(&[7u8; 100])).await.unwrap();
        let map = f.map(4096).unwrap();
        assert_eq!(map.slice(0..100), Some(&[7u8; 100][..]));
        assert_eq!(map.slice(0..101), None, "one byte past the end");
        assert_eq!(map.slice(200..300), None, "wholly past the end");
        f.truncate(50).await.unwrap();
        assert_eq!(map.slice(0..100), None, "past the end after a truncation");
        assert_eq!(map.slice(0..50), Some(&[7u8; 50][..]));
        f.allocate(1000).await.unwrap();
        assert_eq!(
            map.slice(900..1000),
            Some(&[0u8; 100][..]),
            "allocated: zeros"
        );
        assert_eq!(map.slice(900..1001), None);
    });
}
