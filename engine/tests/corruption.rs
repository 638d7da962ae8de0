//! Damage on real files: bits flipped and ranges overwritten at seeded
//! random positions of sealed segments and of index files, and indexes
//! lost or cut short.
//!
//! For every damage, `corelog verify` exits non-zero naming the damaged
//! file and a byte position at or before the first changed byte, and
//! changes nothing. Reopening the engine, per the recovery table:
//!
//! * damage in a confirmed (sealed) segment: under `OpenCheck::Full` the
//!   partition refuses to open with an error naming the file and a
//!   position at or before the damage, and nothing is dropped; under
//!   `OpenCheck::Tail` it refuses the same way when the damage is in the
//!   checked tail (from the segment's last index entry), and otherwise
//!   opens, but then `poll_verified` errors naming the file rather than
//!   return the damaged batch; every batch it does return is byte exact;
//! * damage to an index (an accelerator): the partition opens, the index
//!   is rebuilt, every batch is served byte exact from every offset and
//!   timestamp, and `verify` is clean once the engine closed.
//!
//! Nothing panics. `CORELOG_CORRUPTION_CASES` sets the cases per kind
//! (default 40); `CORELOG_CORRUPTION_SEED` the seed (printed).
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, open, serial};
use corelog::testing::segment::log::{LogError, OpenCheck, OpenError as LogOpenError};
use corelog::{CleanClose, Engine, LogConfig, PollFrom, RequestError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const P: u64 = 3;
const BATCHES: u64 = 120;

fn config(check: OpenCheck) -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        index_interval_bytes: 2 << 10,
        open_check: check,
        ..LogConfig::default()
    }
}

fn cases() -> u64 {
    std::env::var("CORELOG_CORRUPTION_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

fn seed(salt: u64) -> u64 {
    let s = std::env::var("CORELOG_CORRUPTION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00c0_ffee);
    eprintln!("corruption seed {s} (CORELOG_CORRUPTION_SEED={s} replays it)");
    s ^ salt
}

/// A sound data directory: its files, and every stored batch by offset.
struct Pristine {
    files: BTreeMap<PathBuf, Vec<u8>>,
    batches: BTreeMap<u64, Vec<u8>>,
    next_offset: u64,
}

impl Pristine {
    fn make() -> Pristine {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(dir.path(), 1, config(OpenCheck::Tail));
        for seq in 0..BATCHES {
            engine.handle().append(P, batch(P, seq)).wait().unwrap();
        }
        let batches = read_all(&engine);
        let next_offset = engine.handle().stats(P).wait().unwrap().next_offset;
        engine.shutdown().unwrap();
        let mut files = BTreeMap::new();
        let part = dir.path().join("partitions").join(P.to_string());
        for e in std::fs::read_dir(&part).unwrap() {
            let path = e.unwrap().path();
            if path.is_file() {
                let rel = path.strip_prefix(dir.path()).unwrap().to_path_buf();
                files.insert(rel, std::fs::read(&path).unwrap());
            }
        }
        let p = Pristine {
            files,
            batches,
            next_offset,
        };
        assert!(p.logs().len() >= 5, "several sealed segments");
        for log in &p.logs()[..p.logs().len() - 1] {
            assert!(
                p.files.contains_key(&log.with_extension("index")),
                "{} has its sealed index",
                log.display()
            );
        }
        p
    }

    /// Segment files, oldest first (relative paths).
    fn logs(&self) -> Vec<PathBuf> {
        self.files
            .keys()
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .cloned()
            .collect()
    }

    fn indexes(&self) -> Vec<PathBuf> {
        self.files
            .keys()
            .filter(|p| p.extension().is_some_and(|e| e == "index"))
            .cloned()
            .collect()
    }

    /// A copy of the directory to damage.
    fn copy(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, bytes) in &self.files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        dir
    }

    /// Position of the last index entry of a segment, as the pristine
    /// index has it.
    fn last_indexed(&self, log: &Path) -> u64 {
        let index = &self.files[&log.with_extension("index")];
        let (entries, seal) = corelog::testing::segment::log::index::decode_file(index);
        assert!(seal.is_some(), "{} is sealed", log.display());
        u64::from(entries.last().unwrap().position)
    }
}

/// Every batch of the partition, by offset, read with verified polls.
fn read_all(engine: &Engine) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut next = 0;
    loop {
        let reply = futures::executor::block_on(engine.handle().poll_verified(
            P,
            PollFrom::Offset(next),
            64 << 10,
        ))
        .unwrap();
        if reply.is_empty() {
            return out;
        }
        for b in reply.batches() {
            assert_eq!(b.base_offset(), next);
            out.insert(next, b.as_bytes().to_vec());
            next = b.next_offset();
        }
    }
}

/// One damage: bytes of a file replaced.
#[derive(Debug, Clone)]
struct Damage {
    file: PathBuf,
    at: usize,
    bytes: Vec<u8>,
    what: &'static str,
}

impl Damage {
    /// The first byte it actually changes in `original`.
    fn first_changed(&self, original: &[u8]) -> Option<u64> {
        self.bytes
            .iter()
            .enumerate()
            .find(|(i, b)| original[self.at + i] != **b)
            .map(|(i, _)| (self.at + i) as u64)
    }

    fn apply(&self, root: &Path) {
        let p = root.join(&self.file);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[self.at..self.at + self.bytes.len()].copy_from_slice(&self.bytes);
        std::fs::write(&p, bytes).unwrap();
    }
}

/// A random damage of `file`: a few bits flipped, a range overwritten with
/// random bytes, or a range zeroed. Always changes at least one byte.
fn random_damage(rng: &mut fastrand::Rng, file: &Path, original: &[u8]) -> Damage {
    loop {
        let at = rng.usize(0..original.len());
        let room = original.len() - at;
        let (what, bytes) = match rng.u32(0..3) {
            0 => {
                let mut b = vec![original[at]];
                for _ in 0..rng.u32(1..=3) {
                    b[0] ^= 1 << rng.u32(0..8);
                }
                ("bit flip", b)
            }
            1 => {
                let n = rng.usize(1..=room.min(64));
                ("random overwrite", (0..n).map(|_| rng.u8(..)).collect())
            }
            _ => {
                let n = rng.usize(1..=room.min(64));
                ("zeroed range", vec![0u8; n])
            }
        };
        let d = Damage {
            file: file.to_path_buf(),
            at,
            bytes,
            what,
        };
        if d.first_changed(original).is_some() {
            return d;
        }
    }
}

/// `corelog verify` on `root`: exit code and output.
fn verify(root: &Path) -> (Option<i32>, String) {
    let out = common::corelog(&["verify", "--dir", root.to_str().unwrap()], b"");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The byte positions `verify` reports in `file`.
fn findings_in(output: &str, file: &Path) -> Vec<u64> {
    let prefix = format!("{} at byte ", file.display());
    output
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("BAD "))
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| rest.split(':').next()?.parse().ok())
        .collect()
}

/// Checks that `verify` names the damage, and changes nothing.
fn assert_verify_names(root: &Path, d: &Damage, first_changed: u64) {
    let before = snapshot(root);
    let (code, out) = verify(root);
    let file = root.join(&d.file);
    assert_eq!(
        code,
        Some(4),
        "{d:?}: verify must fail (exit 4, damage found):\n{out}"
    );
    let found = findings_in(&out, &file);
    assert!(
        found.iter().any(|&pos| pos <= first_changed),
        "{d:?}: verify names {} at a byte at or before {first_changed}; it said:\n{out}",
        file.display()
    );
    assert_eq!(snapshot(root), before, "{d:?}: verify repairs nothing");
}

fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let part = root.join("partitions").join(P.to_string());
    std::fs::read_dir(part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

fn recovery(engine: &Engine) -> Result<corelog::RecoveryReport, LogOpenError> {
    let r = engine.recovery().iter().find(|r| r.partition == P).unwrap();
    r.result.clone()
}

/// Walks the partition with verified polls from offset 0: every batch it
/// returns must be the pristine one. Returns the error that stopped it, if
/// any.
fn walk_verified(engine: &Engine, pristine: &Pristine, what: &str) -> Option<RequestError> {
    let mut next = 0;
    loop {
        let reply = match futures::executor::block_on(engine.handle().poll_verified(
            P,
            PollFrom::Offset(next),
            8 << 10,
        )) {
            Ok(r) => r,
            Err(e) => return Some(e),
        };
        if reply.is_empty() {
            assert_eq!(next, pristine.next_offset, "{what}: the walk ends early");
            return None;
        }
        for b in reply.batches() {
            assert_eq!(b.base_offset(), next, "{what}");
            assert_eq!(
                Some(&b.as_bytes().to_vec()),
                pristine.batches.get(&next),
                "{what}: a verified poll returned a batch that is not the stored one at offset {next}"
            );
            next = b.next_offset();
        }
    }
}

fn corrupt_at(e: &LogError) -> Option<(&Path, u64)> {
    match e {
        LogError::Corrupt { path, position, .. } => Some((path.as_path(), *position)),
        _ => None,
    }
}

fn open_corrupt_at(e: &LogOpenError) -> Option<(&Path, u64)> {
    match e {
        LogOpenError::Corrupt { path, position, .. } => Some((path.as_path(), *position)),
        _ => None,
    }
}

/// Damage in a sealed segment, under one open check.
fn sealed_segment_damage(check: OpenCheck, salt: u64) {
    let pristine = Pristine::make();
    let logs = pristine.logs();
    let sealed = &logs[..logs.len() - 1];
    let mut rng = fastrand::Rng::with_seed(seed(salt));
    let (mut refused, mut poll_errors, mut trusted_opens) = (0, 0, 0);
    for case in 0..cases() {
        // The pristine directory was closed cleanly. Half the cases keep
        // its clean-close record: a tail open then trusts it, scans
        // nothing, and the damage is for poll_verified to find. The others
        // remove it, as a crash would have left the directory.
        let keep_record = rng.bool();
        let trusted = keep_record && check == OpenCheck::Tail;
        let file = &sealed[rng.usize(0..sealed.len())];
        let original = &pristine.files[file];
        let d = random_damage(&mut rng, file, original);
        let first = d.first_changed(original).unwrap();
        let what = format!(
            "case {case} ({check:?}): {} of {} bytes at {} of {}",
            d.what,
            d.bytes.len(),
            d.at,
            file.display()
        );
        let root = pristine.copy();
        if !keep_record {
            let record = root
                .path()
                .join("partitions")
                .join(P.to_string())
                .join("CLEAN");
            std::fs::remove_file(record).unwrap();
        }
        d.apply(root.path());
        assert_verify_names(root.path(), &d, first);

        let damaged = root.path().join(file);
        let damaged_bytes = std::fs::read(&damaged).unwrap();
        let engine = open(root.path(), 1, config(check));
        let in_checked_tail =
            !trusted && (check == OpenCheck::Full || first >= pristine.last_indexed(file));
        match recovery(&engine) {
            Err(e) => {
                refused += 1;
                let (path, pos) =
                    open_corrupt_at(&e).unwrap_or_else(|| panic!("{what}: refused with {e}"));
                assert_eq!(
                    path, damaged,
                    "{what}: the error names the damaged file: {e}"
                );
                assert!(
                    pos <= first,
                    "{what}: the error names a byte at or before {first}: {e}"
                );
                let text = e.to_string();
                assert!(
                    text.contains(&damaged.display().to_string())
                        && text.contains(&format!("at byte {pos}")),
                    "{what}: the message names file and position: {text}"
                );
                // The partition answers with the error; nothing was dropped.
                match engine.handle().poll(P, PollFrom::First, 1 << 20).wait() {
                    Err(RequestError::Unopenable { ref error, .. })
                        if open_corrupt_at(error) == Some((path, pos)) => {}
                    other => panic!("{what}: a refused partition answers {other:?}"),
                }
            }
            Ok(report) => {
                assert_eq!(
                    report.clean_close == CleanClose::Trusted,
                    trusted,
                    "{what}: {report}"
                );
                trusted_opens += u64::from(trusted);
                assert!(
                    !in_checked_tail,
                    "{what}: damage in the checked part of a confirmed segment must refuse the open; it recovered: {report}"
                );
                assert!(
                    report.cut.is_none() && report.removed.is_empty(),
                    "{what}: {report}"
                );
                let e = walk_verified(&engine, &pristine, &what)
                    .unwrap_or_else(|| panic!("{what}: the damaged batch was served as sound"));
                poll_errors += 1;
                let RequestError::Storage(le) = &e else {
                    panic!("{what}: {e}")
                };
                let (path, _) = corrupt_at(le).unwrap_or_else(|| panic!("{what}: {e}"));
                assert_eq!(path, damaged, "{what}: {e}");
                assert!(
                    e.to_string().contains(&damaged.display().to_string()),
                    "{what}: {e}"
                );
            }
        }
        engine.shutdown().unwrap();
        assert_eq!(
            std::fs::read(&damaged).unwrap(),
            damaged_bytes,
            "{what}: no byte of the damaged segment was dropped or rewritten"
        );
    }
    eprintln!(
        "{check:?}: {} cases: {refused} refused at open, {poll_errors} opened and caught by poll_verified ({trusted_opens} of them trusting the clean-close record)",
        cases()
    );
    if check == OpenCheck::Tail && cases() >= 16 {
        assert!(trusted_opens > 0 && trusted_opens < poll_errors + refused);
    }
    if check == OpenCheck::Full {
        assert_eq!(refused, cases());
    }
}

#[test]
fn damage_in_a_sealed_segment_refuses_a_full_open_naming_file_and_position() {
    let _serial = serial();
    sealed_segment_damage(OpenCheck::Full, 1);
}

#[test]
fn damage_in_a_sealed_segment_is_refused_at_a_tail_open_or_by_poll_verified() {
    let _serial = serial();
    sealed_segment_damage(OpenCheck::Tail, 2);
}

/// After the index of a segment was damaged, lost or cut: the partition
/// opens, serves every batch byte exact from every offset and timestamp,
/// and is sound for `verify` once closed.
/// When `rebuilt` names an index file, it must be rewritten as it was.
fn assert_index_recovered(
    root: &Path,
    pristine: &Pristine,
    check: OpenCheck,
    what: &str,
    rebuilt: Option<&Path>,
) {
    let engine = open(root, 1, config(check));
    if let Some(file) = rebuilt {
        assert_eq!(
            std::fs::read(root.join(file)).unwrap(),
            pristine.files[file],
            "{what}: rebuilt as it was"
        );
    }
    let report = recovery(&engine)
        .unwrap_or_else(|e| panic!("{what}: a damaged index refuses the open: {e}"));
    assert!(
        report.cut.is_none() && report.removed.is_empty(),
        "{what}: {report}"
    );
    if let Some(e) = walk_verified(&engine, pristine, what) {
        panic!("{what}: a sound log after index damage is not served: {e} (recovery: {report})");
    }
    // Every offset and timestamp finds its batch (polls go through the index).
    let offsets: Vec<u64> = pristine.batches.keys().copied().collect();
    for (i, (&base, bytes)) in pristine.batches.iter().enumerate() {
        let next = offsets.get(i + 1).copied().unwrap_or(pristine.next_offset);
        for o in [base, next - 1] {
            let reply = futures::executor::block_on(engine.handle().poll_verified(
                P,
                PollFrom::Offset(o),
                1,
            ))
            .unwrap_or_else(|e| panic!("{what}: poll from offset {o}: {e}"));
            assert_eq!(
                reply.first_offset(),
                base,
                "{what}: a poll from offset {o} starts at the batch holding it"
            );
            assert_eq!(
                reply.batches().next().unwrap().as_bytes(),
                &bytes[..],
                "{what}"
            );
        }
        let ts = corelog::testing::segment::check(bytes, &corelog::Limits::default())
            .unwrap()
            .base_timestamp();
        let reply = futures::executor::block_on(engine.handle().poll_verified(
            P,
            PollFrom::Timestamp(ts),
            1,
        ))
        .unwrap_or_else(|e| panic!("{what}: poll from timestamp {ts}: {e}"));
        let first_at_or_after = pristine
            .batches
            .iter()
            .find(|(_, b)| {
                corelog::testing::segment::check(b, &corelog::Limits::default())
                    .unwrap()
                    .base_timestamp()
                    >= ts
            })
            .map(|(o, _)| *o);
        assert_eq!(
            Some(reply.first_offset()),
            first_at_or_after,
            "{what}: poll from timestamp {ts}"
        );
    }
    let appended = engine.handle().append(P, batch(P, BATCHES)).wait();
    assert_eq!(
        appended.unwrap().base_offset,
        pristine.next_offset,
        "{what}: appends go on"
    );
    engine.shutdown().unwrap();
    let (code, out) = verify(root);
    assert_eq!(
        code,
        Some(0),
        "{what}: sound once reopened and closed:\n{out}"
    );
}

fn index_damage(check: OpenCheck, salt: u64) {
    let pristine = Pristine::make();
    let indexes = pristine.indexes();
    let mut rng = fastrand::Rng::with_seed(seed(salt));
    for case in 0..cases() {
        let file = &indexes[rng.usize(0..indexes.len())];
        let original = &pristine.files[file];
        let d = random_damage(&mut rng, file, original);
        let first = d.first_changed(original).unwrap();
        let what = format!(
            "case {case} ({check:?}): {} of {} bytes at {} of {}",
            d.what,
            d.bytes.len(),
            d.at,
            file.display()
        );
        let root = pristine.copy();
        d.apply(root.path());
        assert_verify_names(root.path(), &d, first);
        assert_index_recovered(root.path(), &pristine, check, &what, Some(file));
    }
}

#[test]
fn a_damaged_index_is_named_by_verify_and_rebuilt_on_a_full_open() {
    let _serial = serial();
    index_damage(OpenCheck::Full, 3);
}

#[test]
fn a_damaged_index_is_named_by_verify_and_rebuilt_on_a_tail_open() {
    let _serial = serial();
    index_damage(OpenCheck::Tail, 4);
}

#[test]
fn a_lost_or_cut_index_is_rebuilt() {
    let _serial = serial();
    let pristine = Pristine::make();
    // The first sealed index, one in the middle, and the active segment's.
    let all = pristine.indexes();
    let picked = [&all[0], &all[all.len() / 2], &all[all.len() - 1]];
    for check in [OpenCheck::Tail, OpenCheck::Full] {
        for file in picked {
            let len = pristine.files[file].len();
            for (how, keep) in [
                ("deleted", None),
                ("emptied", Some(0)),
                ("cut mid-entry", Some(len - 5)),
                ("seal cut off", Some(len.saturating_sub(32))),
            ] {
                let what = format!("{check:?}: {} {how}", file.display());
                let root = pristine.copy();
                let p = root.path().join(file);
                match keep {
                    None => std::fs::remove_file(&p).unwrap(),
                    Some(n) => std::fs::write(&p, &pristine.files[file][..n]).unwrap(),
                }
                assert_index_recovered(root.path(), &pristine, check, &what, Some(file));
            }
        }
    }
}

/// Bit rot in an index entry before a segment's last one. The damage
/// breaks the seal record's checksum, so the segment is recovered rather
/// than trusted; a tail open checks only the last entry and keeps the ones
/// before it unchecked. Here entry 1's relative offset drops (still well
/// formed: it stays above entry 0's), so a poll from an offset between the
/// two true entries is sent to entry 1's batch, past the offset asked for,
/// and the verified reply skips messages without an error. The entry is
/// then sealed into the index again, which makes it trusted from then on.
#[test]
fn regression_a_tail_open_drops_a_garbled_index_entry_before_the_last() {
    let _serial = serial();
    let pristine = Pristine::make();
    let logs = pristine.logs();
    let (log, entries) = logs[..logs.len() - 1]
        .iter()
        .find_map(|log| {
            let index = &pristine.files[&log.with_extension("index")];
            let (entries, _) = corelog::testing::segment::log::index::decode_file(index);
            (entries.len() >= 3 && entries[1].rel_offset >= entries[0].rel_offset + 2)
                .then(|| (log.clone(), entries))
        })
        .expect("a sealed segment with 3 index entries, 2+ messages apart");
    let base: u64 = log.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let index_file = log.with_extension("index");
    let root = pristine.copy();
    let mut bytes = pristine.files[&index_file].clone();
    let garbled = entries[0].rel_offset + 1;
    bytes[16..20].copy_from_slice(&garbled.to_le_bytes());
    std::fs::write(root.path().join(&index_file), &bytes).unwrap();

    let asked = base + u64::from(garbled);
    let engine = open(root.path(), 1, config(OpenCheck::Tail));
    recovery(&engine).unwrap();
    let reply =
        futures::executor::block_on(engine.handle().poll_verified(P, PollFrom::Offset(asked), 1))
            .unwrap();
    let holding = pristine
        .batches
        .range(..=asked)
        .next_back()
        .map(|(o, _)| *o);
    assert_eq!(
        Some(reply.first_offset()),
        holding,
        "a poll from offset {asked} starts at the batch holding it"
    );
    drop(reply);
    engine.shutdown().unwrap();
    assert_eq!(
        std::fs::read(root.path().join(&index_file)).unwrap(),
        pristine.files[&index_file],
        "the index is rebuilt from the log"
    );
}

/// A partition that refused to open (`Unopenable`) opens on
/// `reopen_partition` once its damage is repaired, and is deleted by
/// `delete_partition` without being opened.
#[test]
fn an_unopenable_partition_reopens_once_repaired_and_can_be_deleted() {
    let _serial = serial();
    let pristine = Pristine::make();
    let dir = pristine.copy();
    let first = dir.path().join(&pristine.logs()[0]);
    let sound = std::fs::read(&first).unwrap();
    let mut damaged = sound.clone();
    damaged[300] ^= 0xff;
    let refused = |engine: &Engine| {
        let r = engine.handle().poll(P, PollFrom::First, 1 << 20).wait();
        assert!(matches!(r, Err(RequestError::Unopenable { .. })), "{r:?}");
    };
    std::fs::write(&first, &damaged).unwrap();
    let engine = open(dir.path(), 1, config(OpenCheck::Full));
    refused(&engine);
    std::fs::write(&first, &sound).unwrap();
    engine.handle().reopen_partition(P).wait().unwrap();
    assert_eq!(read_all(&engine), pristine.batches);
    engine.shutdown().unwrap();

    std::fs::write(&first, &damaged).unwrap();
    let engine = open(dir.path(), 1, config(OpenCheck::Full));
    refused(&engine);
    engine.handle().delete_partition(P).wait().unwrap();
    assert!(!dir.path().join("partitions").join(P.to_string()).exists());
    engine.shutdown().unwrap();
}
