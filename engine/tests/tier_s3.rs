//! Tiered storage against a real S3 server: a SeaweedFS (`weed server
//! -s3`) on loopback, with an access key, so every request's signature is
//! checked. Offload and read back from offset 0, a store stopped while
//! sends go on, a damaged object, refused credentials and a missing bucket,
//! and kill -9 of an engine mid-upload and between an upload and its
//! manifest commit. Without `weed` the tests skip, except under CI.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/weed.rs"]
mod weed;

use common::stream::{expected, fill, read_all};
use common::*;
use corelog::tier::manifest::log_key;
use corelog::tier::{ObjectStore, S3Location, S3Store, StoreError, TierError};
use corelog::{Config, Engine, ErrorKind, FsyncPolicy, LogConfig, PollFrom, TierConfig};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weed::{require_weed, Weed};

const SEGMENT: u64 = 64 << 10;
const BUCKET: &str = "corelog-test";

fn log() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Batch,
        segment_bytes: SEGMENT,
        index_interval_bytes: 4096,
        ..LogConfig::default()
    }
}

fn store_at(endpoint: &str, prefix: &str, secret: &str) -> S3Store {
    let location = S3Location::parse(&format!("s3://{BUCKET}/{prefix}"), Some(endpoint)).unwrap();
    let credentials = corelog::tier::Credentials::new(weed::ACCESS_KEY, secret);
    S3Store::new(location, credentials).unwrap()
}

/// The test's store, its bucket created.
fn store(w: &Weed, prefix: &str) -> Arc<S3Store> {
    let s = store_at(&w.endpoint(), prefix, weed::SECRET_KEY);
    s.create_bucket().unwrap();
    Arc::new(s)
}

fn open_tiered(
    dir: &Path,
    store: Arc<dyn ObjectStore>,
    keep: u64,
) -> Result<Engine, corelog::OpenError> {
    let tier = TierConfig {
        local_retention_bytes: keep,
        chunk_bytes: 16 << 10,
        cache_bytes: 256 << 10,
        upload_every: Duration::from_secs(3600),
        ..TierConfig::new(store)
    };
    Engine::open(Config {
        shards: Some(2),
        pin_threads: false,
        log: log(),
        ..Config::new(dir).tier(tier)
    })
}

/// Every object of the partition: each segment the manifest names, once,
/// contiguous, with its index, and nothing else.
fn assert_store_matches_manifest(engine: &Engine, store: &dyn ObjectStore, p: u64) -> usize {
    let m = engine.handle().tier().unwrap().manifest(p).unwrap();
    for w in m.segments.windows(2) {
        assert_eq!(w[0].next_offset, w[1].base_offset, "{m:?}");
    }
    let mut keys: Vec<String> = store
        .list(&format!("partitions/{p}/"))
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    keys.sort();
    let mut named: Vec<String> = m
        .segments
        .iter()
        .flat_map(|s| {
            let k = format!("partitions/{p}/{:020}-{:020}", s.base_offset, s.next_offset);
            [format!("{k}.index"), format!("{k}.log")]
        })
        .chain([format!("partitions/{p}/manifest-{:020}.json", 0)])
        .collect();
    named.sort();
    assert_eq!(keys, named);
    m.segments.len()
}

#[test]
fn offloaded_segments_come_back_from_a_real_store_as_one_log() {
    if !require_weed() {
        return;
    }
    let w = Weed::start();
    let tmp = tempfile::tempdir().unwrap();
    let s = store(&w, "one-log");
    let engine = open_tiered(tmp.path(), s.clone(), SEGMENT).unwrap();
    fill(&engine, 1, 0..1500);
    let report = engine.handle().offload_pass();
    assert!(report.failed.is_empty() && report.trimmed > 5, "{report:?}");
    let held = assert_store_matches_manifest(&engine, s.as_ref(), 1);
    assert!(held >= 8, "{held} segments in the store");
    assert!(engine.handle().stats(1).wait().unwrap().first_offset > 0);
    assert_eq!(read_all(&engine, 1, 32 << 10), expected(1, 1500));
    let figures = engine.handle().tier().unwrap().figures();
    assert!(
        figures.remote_polls.0 > 0 && figures.cache.hits > 0,
        "{figures}"
    );
    engine.shutdown().unwrap();
}

/// A ranged read lands in the caller's buffer: exactly the range's bytes,
/// fewer where the object ends first, nothing past the range written.
#[test]
fn a_ranged_read_fills_the_buffer_given_with_the_ranges_bytes_only() {
    if !require_weed() {
        return;
    }
    let w = Weed::start();
    let s = store(&w, "ranges");
    let object: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    s.put("o", &object).unwrap();
    for (range, buf_len) in [
        (0..4096u64, 4096),
        (1000..61_000, 70_000),
        (99_000..120_000, 30_000),
    ] {
        let mut buf = vec![0xAAu8; buf_len];
        let n = s.get_into("o", range.clone(), &mut buf).unwrap();
        let end = (range.end as usize).min(object.len());
        assert_eq!(n, end - range.start as usize, "{range:?}");
        assert_eq!(&buf[..n], &object[range.start as usize..end], "{range:?}");
        assert!(
            buf[n..].iter().all(|&b| b == 0xAA),
            "{range:?}: written past it"
        );
        assert_eq!(
            buf[..n],
            s.get("o", Some(range.clone())).unwrap()[..],
            "{range:?}"
        );
    }
}

#[test]
fn a_stopped_store_holds_back_nothing_but_the_upload_and_the_backlog_drains_after() {
    if !require_weed() {
        return;
    }
    let mut w = Weed::start();
    let tmp = tempfile::tempdir().unwrap();
    let s = store(&w, "stopped");
    let engine = open_tiered(tmp.path(), s.clone(), SEGMENT).unwrap();
    w.stop();
    fill(&engine, 2, 0..800);
    let report = engine.handle().offload_pass();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(
        report.backlog_segments >= 4 && report.trimmed == 0,
        "{report:?}"
    );
    assert!(
        engine.handle().metrics().to_string().contains("backlog"),
        "{}",
        engine.handle().metrics()
    );
    w.restart();
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.backlog_segments == 0,
        "{report:?}"
    );
    assert_store_matches_manifest(&engine, s.as_ref(), 2);
    assert_eq!(read_all(&engine, 2, 1 << 20), expected(2, 800));
    engine.shutdown().unwrap();
}

/// `corelog verify --tier` (and `tier status --verify`) against the
/// test's store, with the store's credentials in the environment.
fn corelog_against(w: &Weed, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_corelog"))
        .args(args)
        .args(["--tier-endpoint", &w.endpoint()])
        .env("AWS_ACCESS_KEY_ID", weed::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", weed::SECRET_KEY)
        .output()
        .unwrap()
}

fn said(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_damaged_object_in_the_store_is_named_and_never_served() {
    if !require_weed() {
        return;
    }
    let w = Weed::start();
    let tmp = tempfile::tempdir().unwrap();
    let s = store(&w, "damaged");
    let engine = open_tiered(tmp.path(), s.clone(), SEGMENT).unwrap();
    fill(&engine, 3, 0..800);
    fill(&engine, 4, 0..800);
    assert!(engine.handle().offload_pass().failed.is_empty());
    engine.shutdown().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let tier = format!("s3://{BUCKET}/damaged");
    let verify = ["verify", "--dir", dir, "--tier", &tier];
    let status = ["tier", "status", "--dir", dir, "--tier", &tier, "--verify"];
    for args in [&verify[..], &status[..]] {
        let out = corelog_against(&w, args);
        assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    }
    assert!(
        said(&corelog_against(&w, &verify)).contains("the store (s3://"),
        "verify --tier did not look at the store"
    );
    // What `tier status` says the store holds is what its manifest names.
    let m = corelog::tier::upload::load_manifest(s.as_ref(), 3).unwrap();
    assert!(m.segments.len() >= 2, "{m:?}");
    let held = format!(
        "store {} segments ({} B) offsets {}..{}, manifest generation {}",
        m.segments.len(),
        m.segments.iter().map(|r| r.bytes).sum::<u64>(),
        m.segments[0].base_offset,
        m.segments[m.segments.len() - 1].next_offset,
        m.generation
    );
    let out = said(&corelog_against(&w, &status));
    assert!(out.contains(&held), "wanted {held:?} in:\n{out}");

    let key = "partitions/3/".to_owned();
    let first = s
        .list(&key)
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .find(|k| k.ends_with(".log"))
        .unwrap();
    let mut bytes = s.get(&first, None).unwrap();
    let at = batch(3, 0).len() + 300;
    bytes[at] ^= 0xff;
    s.put(&first, &bytes).unwrap();
    let object = format!("s3://{BUCKET}/damaged/{first}");
    for args in [&verify[..], &status[..]] {
        let out = corelog_against(&w, args);
        assert_eq!(out.status.code(), Some(4), "{}", said(&out));
        assert!(said(&out).contains(&object), "{}", said(&out));
    }

    let engine = open_tiered(tmp.path(), s.clone(), SEGMENT).unwrap();
    let err = engine
        .handle()
        .poll(3, PollFrom::Offset(0), 1 << 20)
        .wait()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains(&object), "{err}");
    engine.shutdown().unwrap();
    s.put(
        &first,
        &s.get(&first, None)
            .map(|mut b| {
                b[at] ^= 0xff;
                b
            })
            .unwrap(),
    )
    .unwrap();

    // A manifest that lost its newest segment: offsets in neither place.
    let mut m = corelog::tier::upload::load_manifest(s.as_ref(), 3).unwrap();
    let lost = m.segments.pop().unwrap();
    corelog::tier::upload::commit(s.as_ref(), &mut m, &|| true).unwrap();
    let out = corelog_against(&w, &verify);
    assert_eq!(out.status.code(), Some(4), "{}", said(&out));
    assert!(
        said(&out).contains(&format!("offsets {}..", lost.base_offset)),
        "{}",
        said(&out)
    );

    // Another partition's object under partition 3's name, the manifest's
    // length and checksum made to agree with it: named by its batches'
    // partition.
    let theirs = corelog::tier::upload::load_manifest(s.as_ref(), 4)
        .unwrap()
        .segments[0]
        .clone();
    let ours = &mut m.segments[0];
    assert_eq!(
        (ours.base_offset, ours.next_offset, ours.bytes),
        (theirs.base_offset, theirs.next_offset, theirs.bytes)
    );
    let (key, other) = (log_key(3, ours), log_key(4, &theirs));
    s.put(&key, &s.get(&other, None).unwrap()).unwrap();
    ours.checksum = theirs.checksum;
    corelog::tier::upload::commit(s.as_ref(), &mut m, &|| true).unwrap();
    let wrong = "belongs to partition 4, not 3";
    for args in [&verify[..], &status[..]] {
        let out = corelog_against(&w, args);
        assert_eq!(out.status.code(), Some(4), "{}", said(&out));
        assert!(said(&out).contains(wrong), "{}", said(&out));
    }
}

#[test]
fn wrong_credentials_and_a_missing_bucket_are_refused_at_open_by_name() {
    if !require_weed() {
        return;
    }
    let w = Weed::start();
    let tmp = tempfile::tempdir().unwrap();
    store(&w, "creds");
    let wrong = Arc::new(store_at(&w.endpoint(), "creds", "not-the-secret"));
    let err = open_tiered(tmp.path(), wrong, SEGMENT).unwrap_err();
    let corelog::OpenError::Tier { error } = &err else {
        panic!("{err}");
    };
    assert!(
        matches!(**error, TierError::Store(StoreError::Credentials { .. })),
        "{err}"
    );
    assert!(err.to_string().contains(weed::ACCESS_KEY), "{err}");
    let location = S3Location::parse("s3://no-such-bucket/x", Some(&w.endpoint())).unwrap();
    let missing = S3Store::new(
        location,
        corelog::tier::Credentials::new(weed::ACCESS_KEY, weed::SECRET_KEY),
    )
    .unwrap();
    let err = open_tiered(tmp.path(), Arc::new(missing), SEGMENT).unwrap_err();
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
    // Nobody answers at all.
    let nobody = store_at("http://127.0.0.1:9", "x", weed::SECRET_KEY);
    let err = open_tiered(tmp.path(), Arc::new(nobody), SEGMENT).unwrap_err();
    assert!(err.to_string().contains("does not answer"), "{err}");
}

/// A store that, at its `nth` PUT of a key ending in `suffix`, leaves a
/// marker file and never answers: the moment the parent kills the process.
#[derive(Debug)]
struct HoldAt {
    inner: S3Store,
    suffix: &'static str,
    nth: usize,
    seen: AtomicUsize,
    marker: PathBuf,
}

impl HoldAt {
    fn hold(&self, key: &str) {
        if key.ends_with(self.suffix) && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.nth {
            std::fs::write(&self.marker, key).unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

impl ObjectStore for HoldAt {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn object_name(&self, key: &str) -> String {
        self.inner.object_name(key)
    }
    fn check(&self) -> Result<(), StoreError> {
        self.inner.check()
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.hold(key);
        self.inner.put(key, bytes)
    }
    fn put_reader(
        &self,
        key: &str,
        body: &mut dyn std::io::Read,
        len: u64,
    ) -> Result<(), StoreError> {
        self.hold(key);
        self.inner.put_reader(key, body, len)
    }
    fn get(&self, key: &str, range: Option<std::ops::Range<u64>>) -> Result<Vec<u8>, StoreError> {
        self.inner.get(key, range)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<corelog::tier::ObjectInfo>, StoreError> {
        self.inner.list(prefix)
    }
}

const CHILD: &str = "CORELOG_TIER_KILL_CHILD";
const BATCHES: u64 = 800;

/// The killed process (run by `kill_9_...` with `CHILD` set): appends
/// (each acknowledged durably), then offloads until its store holds.
#[test]
fn tier_kill_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (dir, endpoint, prefix, suffix, nth) = (parts[0], parts[1], parts[2], parts[3], parts[4]);
    let store = HoldAt {
        inner: store_at(endpoint, prefix, weed::SECRET_KEY),
        suffix: if suffix == "log" { ".log" } else { ".json" },
        nth: nth.parse().unwrap(),
        seen: AtomicUsize::new(0),
        marker: Path::new(dir).join("held"),
    };
    let engine = open_tiered(&Path::new(dir).join("data"), Arc::new(store), SEGMENT).unwrap();
    fill(&engine, 4, 0..BATCHES);
    std::fs::write(Path::new(dir).join("acked"), BATCHES.to_string()).unwrap();
    engine.handle().offload_pass();
    panic!("the store never held the upload");
}

/// kill -9 at the `nth` PUT ending in `suffix`, then an engine opened on
/// the same directory and store: nothing lost, nothing twice, no stray.
fn kill_at(w: &Weed, suffix: &str, nth: usize, prefix: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(w, prefix);
    let spec = format!(
        "{}|{}|{prefix}|{suffix}|{nth}",
        tmp.path().display(),
        w.endpoint()
    );
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tier_kill_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, spec)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let held = tmp.path().join("held");
    let started = Instant::now();
    while !held.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child ended before the hold"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no hold in 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let acked: u64 = std::fs::read_to_string(tmp.path().join("acked"))
        .unwrap()
        .parse()
        .unwrap();
    let engine = open_tiered(&tmp.path().join("data"), s.clone(), SEGMENT).unwrap();
    let report = engine.handle().offload_pass();
    assert!(
        report.failed.is_empty() && report.uploaded > 0,
        "{report:?}"
    );
    let held = assert_store_matches_manifest(&engine, s.as_ref(), 4);
    assert!(held >= nth, "{held} segments");
    assert_eq!(read_all(&engine, 4, 1 << 20), expected(4, acked));
    engine.shutdown().unwrap();
}

#[test]
fn kill_9_mid_upload_and_before_the_manifest_commit_loses_and_repeats_nothing() {
    if !require_weed() {
        return;
    }
    let w = Weed::start();
    // While the third segment's log object is being sent.
    kill_at(&w, "log", 3, "kill-mid-upload");
    // The third segment's objects complete, its manifest commit not made.
    kill_at(&w, "manifest", 3, "kill-before-commit");
}
