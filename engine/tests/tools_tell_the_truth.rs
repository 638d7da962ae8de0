//! The tools say exactly what happened, and reads change nothing: `poll`
//! leaves the directory byte-identical and verifies what it prints,
//! `verify` says what recovery will do (and recovery does it), recovery
//! prints what it cut, damage before whole batches is refused and repaired
//! explicitly (nothing deleted), a batch of another partition is damage,
//! and the exit codes mean one thing each.
//!
//! Each test holds `serial()`: they open engines in this process and spawn
//! `corelog`, and a child spawned while another test's engine held the
//! directory lock keeps that lock until it execs (a repair was refused as
//! "locked by another process" once in eight runs).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use corelog::{Config, Engine, LogConfig, RequestError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const P: u64 = 4;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A data directory with partition `P` holding batches `0..n` of stream 9
/// in 4 KiB segments (so several rotated ones); returns its segment files.
fn filled(dir: &Path, n: u64) -> Vec<PathBuf> {
    filled_in(dir, n, "4KiB")
}

/// Like [`filled`], with segments of `segment_bytes`.
fn filled_in(dir: &Path, n: u64, segment_bytes: &str) -> Vec<PathBuf> {
    let input: Vec<u8> = (0..n).flat_map(|s| batch(9, s)).collect();
    let d = dir.to_str().unwrap();
    let p = P.to_string();
    let out = corelog(
        &[
            "append",
            "--dir",
            d,
            "--partition",
            &p,
            "--segment-bytes",
            segment_bytes,
        ],
        &input,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    segments(dir)
}

fn pdir(dir: &Path) -> PathBuf {
    dir.join("partitions").join(P.to_string())
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(pdir(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// Every file under `dir` (the lock file too) and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(p, bytes);
            }
        }
    }
    out
}

/// Start positions of the batches in a segment file (whole ones only).
fn positions(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 256 <= bytes.len() {
        let len = u64::from_le_bytes(bytes[pos + 32..pos + 40].try_into().unwrap()) as usize;
        if len < 256 || pos + len > bytes.len() {
            break;
        }
        out.push(pos);
        pos += len;
    }
    out
}

fn run(args: &[&str]) -> (Option<i32>, String, Vec<u8>) {
    let out = corelog(args, b"");
    let said = text(&out.stdout) + &text(&out.stderr);
    (out.status.code(), said, out.stdout)
}

fn poll(dir: &Path, extra: &[&str]) -> (Option<i32>, String, Vec<u8>) {
    let p = P.to_string();
    let mut args = vec!["poll", "--dir", dir.to_str().unwrap(), "--partition", &p];
    args.extend_from_slice(extra);
    run(&args)
}

fn verify(dir: &Path) -> (Option<i32>, String) {
    let (code, said, _) = run(&["verify", "--dir", dir.to_str().unwrap()]);
    (code, said)
}

/// Fills a directory (see [`filled`]) and tears its last batch: only its
/// first 100 bytes remain. Returns the segment, its bytes before, and
/// where the torn batch starts.
fn torn_tail(dir: &Path) -> (PathBuf, Vec<u8>, usize) {
    let segs = filled(dir, 40);
    let last = segs.last().unwrap().clone();
    let bytes = std::fs::read(&last).unwrap();
    let tail = *positions(&bytes).last().unwrap();
    std::fs::write(&last, &bytes[..tail + 100]).unwrap();
    (last, bytes, tail)
}

/// Flips a payload byte of the batch holding byte `near` of `file` (past
/// its headers); returns that batch's start.
fn flip_in_batch(file: &Path, near: usize) -> usize {
    let mut bytes = std::fs::read(file).unwrap();
    let start = *positions(&bytes)
        .iter()
        .rev()
        .find(|&&p| p <= near)
        .unwrap();
    let at = start + 256 + 48 + 5;
    bytes[at] ^= 0x5a;
    std::fs::write(file, bytes).unwrap();
    start
}

/// Opens an engine on `dir` and returns what recovery said of `P`.
fn recovery_of(dir: &Path) -> Result<String, String> {
    let engine = Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(1),
        log: LogConfig::default(),
        ..Config::new(dir)
    })
    .unwrap();
    let r = engine
        .recovery()
        .iter()
        .find(|r| r.partition == P)
        .unwrap()
        .result
        .clone();
    engine.shutdown().unwrap();
    r.map(|report| report.to_string())
        .map_err(|e| e.to_string())
}

/// The line of `verify` that says what recovery will do for `P`.
fn verify_outlook(said: &str) -> String {
    said.lines()
        .find_map(|l| l.trim().strip_prefix("recovery at the next open"))
        .unwrap_or_else(|| panic!("verify says what recovery will do: {said}"))
        .to_string()
}

#[test]
fn poll_leaves_the_directory_byte_identical_even_with_a_torn_tail() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, bytes, tail) = torn_tail(dir);
    let before = snapshot(dir);
    for args in [
        &["--first"][..],
        &["--last"],
        &["--offset", "7"],
        &["--first", "--no-verify"],
    ] {
        let (code, said, out) = poll(dir, args);
        assert_eq!(code, Some(0), "{args:?}: {said}");
        assert!(!out.is_empty(), "{args:?}");
        assert_eq!(snapshot(dir), before, "poll {args:?} changed the directory");
    }
    // The torn batch is not served: the last batch polled is the one before.
    let (_, _, out) = poll(dir, &["--last"]);
    assert_eq!(
        out,
        bytes[positions(&bytes)[positions(&bytes).len() - 2]..tail]
    );
}

#[test]
fn poll_verifies_what_it_prints_and_names_damage() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let segs = filled_in(dir, 40, "1GiB");
    let active = segs.last().unwrap().clone();
    let bytes = std::fs::read(&active).unwrap();
    assert!(bytes.len() > 3100, "the active segment holds byte 3000");
    let damaged = flip_in_batch(&active, 3000);
    assert!(
        positions(&bytes).iter().any(|&p| p > damaged),
        "whole batches follow"
    );
    let first_of_active = {
        let name = active.file_stem().unwrap().to_str().unwrap();
        name.parse::<u64>().unwrap()
    };
    let (code, said, out) = poll(
        dir,
        &[
            "--offset",
            &first_of_active.to_string(),
            "--max-bytes",
            "1MiB",
        ],
    );
    assert_eq!(code, Some(4), "damage found: {said}");
    let named = format!("{} at byte {damaged}", active.display());
    assert!(said.contains(&named), "names {named}: {said}");
    assert_eq!(
        out,
        bytes[..damaged],
        "the batches before the damage, nothing after"
    );
    // Asked not to verify, it serves the stored bytes as they are.
    let (code, _, out) = poll(
        dir,
        &[
            "--offset",
            &first_of_active.to_string(),
            "--max-bytes",
            "1MiB",
            "--no-verify",
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(out.len(), std::fs::read(&active).unwrap().len());
}

#[test]
fn verify_says_exactly_what_recovery_does() {
    let _serial = serial();
    // A torn tail: recovery cuts it.
    let tmp = tempfile::tempdir().unwrap();
    let (last, _, tail) = torn_tail(tmp.path());
    let last = &last;
    let (code, said) = verify(tmp.path());
    assert_eq!(code, Some(4), "{said}");
    let outlook = verify_outlook(&said);
    let done = recovery_of(tmp.path()).unwrap();
    assert_eq!(
        outlook,
        format!(" will: {done}"),
        "verify said what recovery did"
    );
    assert!(
        done.contains(&format!("cut {} at byte {tail}", last.display())),
        "{done}"
    );

    // A flipped byte with whole batches after it, in the part recovery
    // checks (the active segment's last batches): recovery refuses.
    // The partition closed cleanly: its clean-close record is removed, as a
    // crash would have left it (`verify_sees_damage_a_clean_close_record_hides`
    // keeps it).
    let tmp = tempfile::tempdir().unwrap();
    let segs = filled(tmp.path(), 40);
    let active = segs.last().unwrap();
    std::fs::remove_file(active.parent().unwrap().join("CLEAN")).unwrap();
    let bytes = std::fs::read(active).unwrap();
    let ps = positions(&bytes);
    let damaged = flip_in_batch(active, ps[ps.len() - 2]);
    let (code, said) = verify(tmp.path());
    assert_eq!(code, Some(4), "{said}");
    assert!(
        !said.contains("torn tail"),
        "damage before whole batches is no torn tail: {said}"
    );
    let refused = recovery_of(tmp.path()).unwrap_err();
    assert_eq!(verify_outlook(&said), format!(" will refuse: {refused}"));
    assert!(
        refused.contains(&format!("{} at byte {damaged}", active.display())),
        "{refused}"
    );
    assert!(
        said.contains("corelog repair"),
        "verify says how to proceed: {said}"
    );
}

/// After a clean close, opening trusts the clean-close record and reads
/// nothing: a byte flipped later (bit rot, not a crash) is no reason to
/// refuse the open. `verify` still finds it, says that opening will not
/// look there, and a verified poll refuses it naming file and byte.
#[test]
fn verify_sees_damage_a_clean_close_record_hides() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let segs = filled(tmp.path(), 40);
    let active = segs.last().unwrap();
    let bytes = std::fs::read(active).unwrap();
    let ps = positions(&bytes);
    let damaged = flip_in_batch(active, ps[ps.len() - 2]);
    let (code, said) = verify(tmp.path());
    assert_eq!(code, Some(4), "{said}");
    assert!(
        said.contains(&format!("{} at byte {damaged}", active.display())),
        "{said}"
    );
    assert!(
        said.contains("opening trusts its clean-close record"),
        "{said}"
    );
    let done = recovery_of(tmp.path()).unwrap();
    assert!(done.contains("closed cleanly: nothing scanned"), "{done}");
    let first_of_active: u64 = active
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (code, said, _) = poll(
        tmp.path(),
        &[
            "--offset",
            &first_of_active.to_string(),
            "--max-bytes",
            "1MiB",
        ],
    );
    assert_eq!(code, Some(4), "{said}");
    assert!(
        said.contains(&format!("{} at byte {damaged}", active.display())),
        "{said}"
    );
}

#[test]
fn recovery_prints_what_it_cut() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (last, _, tail) = torn_tail(dir);
    let last = &last;
    let p = P.to_string();
    let out = corelog(
        &["append", "--dir", dir.to_str().unwrap(), "--partition", &p],
        &batch(9, 99),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let line = format!("cut {} at byte {tail} (100 bytes dropped", last.display());
    assert!(
        stderr.contains(&line),
        "recovery says what it cut: {stderr}"
    );
}

#[test]
fn damage_in_an_unsealed_rotated_segment_is_refused_then_repaired_keeping_everything() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let segs = filled(dir, 40);
    assert!(segs.len() >= 4, "{segs:?}");
    // The second segment lost its seal record (its sealing never finished)
    // and a byte of its last batch flipped; later segments hold whole batches.
    let victim = &segs[1];
    let index = victim.with_extension("index");
    let idx = std::fs::read(&index).unwrap();
    std::fs::write(&index, &idx[..idx.len() / 24 * 24 - 24]).unwrap();
    let bytes = std::fs::read(victim).unwrap();
    let damaged = flip_in_batch(victim, bytes.len() - 1);
    let later: Vec<(PathBuf, Vec<u8>)> = segs[2..]
        .iter()
        .map(|s| (s.clone(), std::fs::read(s).unwrap()))
        .collect();
    let before = snapshot(dir);

    let refused = recovery_of(dir).unwrap_err();
    assert!(
        refused.contains(&format!("{} at byte {damaged}", victim.display())),
        "{refused}"
    );
    let mut after = snapshot(dir);
    after.remove(&dir.join(".lock"));
    let mut expected = before.clone();
    expected.remove(&dir.join(".lock"));
    assert_eq!(after, expected, "a refused open deletes and cuts nothing");

    let (code, said, _) = run(&[
        "repair",
        "--dir",
        dir.to_str().unwrap(),
        "--partition",
        &P.to_string(),
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!("cut {} at byte {damaged}", victim.display())),
        "{said}"
    );
    let aside = pdir(dir).join("aside");
    let kept: Vec<Vec<u8>> = std::fs::read_dir(&aside)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    for (path, bytes) in &later {
        assert!(
            kept.contains(bytes),
            "{} kept byte for byte in aside/",
            path.display()
        );
        assert!(
            said.contains(&path.display().to_string()),
            "says it moved {}: {said}",
            path.display()
        );
    }
    assert!(recovery_of(dir).is_ok(), "the repaired partition opens");
    let (code, said, out) = poll(dir, &["--first", "--max-bytes", "1GiB"]);
    assert_eq!((code, out.is_empty()), (Some(0), false), "{said}");
}

#[test]
fn a_batch_of_another_partition_is_damage_not_data() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    filled(dir, 10);
    // Partition P's files copied into partition P + 1's directory.
    let other = dir.join("partitions").join((P + 1).to_string());
    std::fs::create_dir_all(&other).unwrap();
    for s in segments(dir) {
        std::fs::copy(&s, other.join(s.file_name().unwrap())).unwrap();
    }
    let (code, said) = verify(dir);
    assert_eq!(code, Some(4), "{said}");
    assert!(
        said.contains(&format!(
            "stamped for partition {P}, but this is partition {}",
            P + 1
        )),
        "{said}"
    );
    let engine = Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(1),
        ..Config::new(dir)
    })
    .unwrap();
    let e = engine
        .handle()
        .poll(P + 1, corelog::PollFrom::First, 1 << 20)
        .wait()
        .unwrap_err();
    assert!(
        matches!(e, RequestError::Unopenable { partition, .. } if partition == P + 1),
        "{e}"
    );
    engine.shutdown().unwrap();
}

#[test]
fn exit_codes_mean_one_thing_each() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    let usage = corelog(&["append", "--dir", d], b"");
    assert_eq!(usage.status.code(), Some(2), "a usage error");
    let mut bad = batch(9, 0);
    bad[300] ^= 1;
    let refused = corelog(&["append", "--dir", d, "--partition", "1"], &bad);
    assert_eq!(refused.status.code(), Some(3), "an invalid batch");
    let help = corelog(&["--help"], b"");
    let help = text(&help.stdout);
    assert!(
        help.contains("3 input refused") && help.contains("2 usage error"),
        "{help}"
    );
}
