//! The `corelog` command-line contract, end to end, on real directories:
//! `append` from a stream on stdin with one JSON line per stored batch and
//! exit 3 at the first invalid batch (2 is a usage error); `poll` byte for byte by offset,
//! timestamp, first, last and `--max-bytes`; `verify` naming each bad file
//! and byte position without repairing anything; `dump --messages`; and
//! `--help` everywhere.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, corelog, messages_in};
use corelog::testing::segment::check;
use corelog::Limits;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary data directory and its path as an argument.
struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn arg(&self) -> &str {
        self.tmp.path().to_str().unwrap()
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn partition(&self, p: u64) -> PathBuf {
        self.path().join("partitions").join(p.to_string())
    }

    /// The partition's segment files, oldest first.
    fn segments(&self, p: u64) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.partition(p))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        v.sort();
        v
    }

    fn append(&self, p: u64, extra: &[&str], stdin: &[u8]) -> Output {
        let p = p.to_string();
        let mut args = vec!["append", "--dir", self.arg(), "--partition", &p];
        args.extend_from_slice(extra);
        corelog(&args, stdin)
    }

    /// Appends and expects success; returns the acknowledgements.
    fn append_ok(&self, p: u64, extra: &[&str], stdin: &[u8]) -> Vec<Ack> {
        let out = self.append(p, extra, stdin);
        assert!(
            out.status.success(),
            "append failed: {:?}\n{}",
            out.status,
            text(&out.stderr)
        );
        acks(&out.stdout)
    }

    fn poll(&self, p: u64, extra: &[&str]) -> Output {
        let p = p.to_string();
        let mut args = vec!["poll", "--dir", self.arg(), "--partition", &p];
        args.extend_from_slice(extra);
        corelog(&args, b"")
    }

    /// Polls and expects success; returns the bytes.
    fn poll_ok(&self, p: u64, extra: &[&str]) -> Vec<u8> {
        let out = self.poll(p, extra);
        assert!(
            out.status.success(),
            "poll {extra:?} failed: {}",
            text(&out.stderr)
        );
        out.stdout
    }
}

/// One acknowledgement line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ack {
    partition: u64,
    base_offset: u64,
    messages: u64,
    bytes: u64,
}

/// Parses the JSON lines of `append`: exactly the four documented fields.
fn acks(stdout: &[u8]) -> Vec<Ack> {
    text(stdout)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let o = v.as_object().unwrap();
            let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                ["base_offset", "bytes", "messages", "partition"],
                "{line}"
            );
            let f = |k: &str| o[k].as_u64().unwrap();
            Ack {
                partition: f("partition"),
                base_offset: f("base_offset"),
                messages: f("messages"),
                bytes: f("bytes"),
            }
        })
        .collect()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Splits concatenated batches by their `batch_length`.
fn split(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = u64_at(bytes, 32) as usize;
        assert!(len >= 256 && len <= bytes.len(), "whole batches only");
        out.push(&bytes[..len]);
        bytes = &bytes[len..];
    }
    out
}

/// Checks that `stored` is `produced` as the server stamped it into
/// partition `p` at `base_offset`: a valid batch, the producer's fields and
/// frames untouched.
fn assert_stamped(stored: &[u8], produced: &[u8], p: u64, base_offset: u64) {
    let view = check(stored, &Limits::default()).unwrap();
    assert_eq!(view.partition_id(), p);
    assert_eq!(view.base_offset(), base_offset);
    assert!(view.base_timestamp() > 0);
    assert_eq!(stored.len(), produced.len());
    // origin_timestamp, batch_length; message_count and the reserved bytes.
    assert_eq!(stored[24..40], produced[24..40]);
    assert_eq!(stored[48..256], produced[48..256]);
    assert_eq!(stored[256..], produced[256..], "frames byte for byte");
}

/// Batches `0..n` of stream `tag`, and their concatenation.
fn stream(tag: u64, n: u64) -> (Vec<Vec<u8>>, Vec<u8>) {
    let batches: Vec<Vec<u8>> = (0..n).map(|seq| batch(tag, seq)).collect();
    let all = batches.concat();
    (batches, all)
}

/// The producer vectors shared with the segment crate, sorted by name.
fn vectors() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../segment/tests/vectors");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".producer.bin").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "the shared vectors are there");
    names
        .into_iter()
        .map(|n| {
            let producer = std::fs::read(dir.join(format!("{n}.producer.bin"))).unwrap();
            let stamped = std::fs::read(dir.join(format!("{n}.stamped.bin"))).unwrap();
            (n, producer, stamped)
        })
        .collect()
}

#[test]
fn append_acknowledges_each_batch_and_poll_returns_them_byte_for_byte() {
    let dir = Dir::new();
    let (batches, input) = stream(1, 12);
    let acks = dir.append_ok(7, &[], &input);
    assert_eq!(acks.len(), batches.len(), "one line per batch");
    let mut next = 0;
    for (seq, (ack, b)) in acks.iter().zip(&batches).enumerate() {
        let expected = Ack {
            partition: 7,
            base_offset: next,
            messages: messages_in(seq as u64),
            bytes: b.len() as u64,
        };
        assert_eq!(*ack, expected);
        next += ack.messages;
    }
    let out = dir.poll_ok(7, &["--first"]);
    let stored = split(&out);
    assert_eq!(stored.len(), batches.len());
    for ((s, b), ack) in stored.iter().zip(&batches).zip(&acks) {
        assert_stamped(s, b, 7, ack.base_offset);
    }
    // A second run continues the partition.
    let more = dir.append_ok(7, &[], &batch(1, 12));
    assert_eq!(more[0].base_offset, next);
}

#[test]
fn the_shared_vectors_are_stored_with_their_frames_untouched() {
    let dir = Dir::new();
    let vs = vectors();
    let input: Vec<u8> = vs.iter().flat_map(|v| v.1.clone()).collect();
    let acks = dir.append_ok(5, &[], &input);
    assert_eq!(acks.len(), vs.len());
    let out = dir.poll_ok(5, &["--first"]);
    let stored = split(&out);
    assert_eq!(stored.len(), vs.len());
    for (((name, producer, stamped), s), ack) in vs.iter().zip(&stored).zip(&acks) {
        assert_eq!(ack.bytes, producer.len() as u64, "{name}");
        assert_stamped(s, producer, 5, ack.base_offset);
        // The vector's own stamped form differs only in the stamp.
        assert_eq!(
            s[256..],
            stamped[256..],
            "{name}: frames as in the stamped vector"
        );
        assert_eq!(s[24..40], stamped[24..40], "{name}");
        assert_eq!(s[48..256], stamped[48..256], "{name}");
    }
}

#[test]
fn poll_starts_at_an_offset_a_timestamp_the_first_or_the_last_batch() {
    let dir = Dir::new();
    let (batches, input) = stream(2, 10);
    let acks = dir.append_ok(1, &[], &input);
    let all = dir.poll_ok(1, &["--first"]);
    let stored = split(&all);
    assert_eq!(stored.len(), 10);
    let poll_from = |args: &[&str]| -> Vec<u64> {
        split(&dir.poll_ok(1, args))
            .iter()
            .map(|b| u64_at(b, 8))
            .collect()
    };
    let bases: Vec<u64> = acks.iter().map(|a| a.base_offset).collect();

    // --offset: the batch holding it, then the rest.
    for (k, ack) in acks.iter().enumerate() {
        for o in ack.base_offset..ack.base_offset + ack.messages {
            let o = o.to_string();
            assert_eq!(poll_from(&["--offset", &o]), bases[k..], "--offset {o}");
        }
    }
    let end = (acks[9].base_offset + acks[9].messages).to_string();
    assert!(
        dir.poll_ok(1, &["--offset", &end]).is_empty(),
        "nothing at the end"
    );
    // Byte for byte from the middle too.
    let from4 = dir.poll_ok(1, &["--offset", &bases[4].to_string()]);
    assert_eq!(from4, stored[4..].concat());
    for (s, b) in split(&from4).iter().zip(&batches[4..]) {
        assert_eq!(s[256..], b[256..]);
    }

    // --first and --last.
    assert_eq!(poll_from(&["--first"]), bases);
    assert_eq!(
        dir.poll_ok(1, &["--last"]),
        stored[9],
        "--last: the last batch alone"
    );

    // --timestamp: the first batch stamped at or after it.
    let stamps: Vec<u64> = stored.iter().map(|b| u64_at(b, 16)).collect();
    assert!(
        stamps.windows(2).all(|w| w[0] <= w[1]),
        "stamps never go back"
    );
    for t in [0, stamps[0], stamps[3], stamps[3] + 1, stamps[9]] {
        let k = stamps.iter().position(|&s| s >= t).unwrap();
        let ts = t.to_string();
        assert_eq!(
            poll_from(&["--timestamp", &ts]),
            bases[k..],
            "--timestamp {t}"
        );
    }
    let after = (stamps[9] + 1).to_string();
    assert!(dir.poll_ok(1, &["--timestamp", &after]).is_empty());
}

#[test]
fn max_bytes_bounds_a_poll_in_whole_batches_but_returns_at_least_one() {
    let dir = Dir::new();
    let (batches, input) = stream(3, 6);
    dir.append_ok(0, &[], &input);
    let count = |max: &str| split(&dir.poll_ok(0, &["--first", "--max-bytes", max])).len();
    let (l0, l1) = (batches[0].len(), batches[1].len());
    assert_eq!(count("1"), 1, "at least one batch, even when larger");
    assert_eq!(count(&(l0 - 1).to_string()), 1);
    assert_eq!(count(&l0.to_string()), 1);
    assert_eq!(count(&(l0 + l1 - 1).to_string()), 1, "no partial batch");
    assert_eq!(count(&(l0 + l1).to_string()), 2);
    assert_eq!(count("1MiB"), 6);
    let kib: usize = 1024;
    let within_kib = batches
        .iter()
        .scan(0, |sum, b| {
            *sum += b.len();
            Some(*sum)
        })
        .take_while(|&s| s <= kib)
        .count()
        .max(1);
    assert_eq!(count("1KiB"), within_kib, "sizes take units");

    // The default is 1 MiB: 100 kB batches, 10 of them fit.
    let big = Dir::new();
    let payload = vec![0x5a; 100_000];
    let input: Vec<u8> = (0..14)
        .flat_map(|i| {
            let mut b = corelog::BatchBuilder::new();
            b.push(corelog::MessageSpec {
                id: i,
                timestamp: 1,
                payload: &payload,
                user_headers: b"",
            });
            b.build().unwrap()
        })
        .collect();
    big.append_ok(0, &[], &input);
    let default = split(&big.poll_ok(0, &["--first"])).len();
    let per = 256 + 48 + 100_000;
    assert_eq!(default, (1 << 20) / per);
}

#[test]
fn an_invalid_batch_mid_stream_exits_3_naming_it_and_keeps_the_ones_before() {
    let (batches, _) = stream(4, 4);
    let mut bad_frame = batches[2].clone();
    bad_frame[256 + 48] ^= 0xff;
    let mut bad_reserved = batches[2].clone();
    bad_reserved[200] = 7;
    let mut short_length = batches[2].clone();
    short_length[32..40].copy_from_slice(&100u64.to_le_bytes());
    let mut huge_length = batches[2].clone();
    huge_length[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let at = (batches[0].len() + batches[1].len()).to_string();
    for (what, bad, says) in [
        ("frame checksum", bad_frame, "checksum"),
        ("reserved byte", bad_reserved, "reserved"),
        (
            "batch_length below the header",
            short_length,
            "batch_length",
        ),
        ("batch_length over the limit", huge_length, "batch_length"),
    ] {
        let dir = Dir::new();
        let input = [&batches[0][..], &batches[1], &bad, &batches[3]].concat();
        let out = dir.append(6, &[], &input);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{what}: {stderr}");
        assert!(
            stderr.contains("batch 2"),
            "{what}: names the batch: {stderr}"
        );
        assert!(
            stderr.contains(&at),
            "{what}: names its stdin position {at}: {stderr}"
        );
        assert!(
            stderr.contains(says),
            "{what}: says what is wrong: {stderr}"
        );
        let acks = acks(&out.stdout);
        assert_eq!(
            acks.len(),
            2,
            "{what}: the batches before it were acknowledged"
        );
        let stored = dir.poll_ok(6, &["--first"]);
        let stored = split(&stored);
        assert_eq!(
            stored.len(),
            2,
            "{what}: nothing of batch 2 or after is stored"
        );
        assert_stamped(stored[0], &batches[0], 6, 0);
        assert_stamped(stored[1], &batches[1], 6, acks[1].base_offset);
        let verify = corelog(&["verify", "--dir", dir.arg()], b"");
        assert!(verify.status.success(), "{what}: {}", text(&verify.stdout));
    }
}

#[test]
fn an_invalid_first_batch_stores_nothing() {
    let dir = Dir::new();
    let mut bad = batch(5, 0);
    bad[300] ^= 1;
    let out = dir.append(2, &[], &[bad, batch(5, 1)].concat());
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("batch 0"));
    assert!(out.stdout.is_empty());
    let poll = dir.poll(2, &["--first"]);
    assert!(!poll.status.success());
    assert!(poll.stdout.is_empty());
    let stderr = text(&poll.stderr);
    assert!(
        stderr.contains("partition 2") && stderr.contains(dir.arg()),
        "{stderr}"
    );
}

#[test]
fn a_truncated_stream_exits_3_naming_the_cut_batch() {
    let (batches, _) = stream(6, 3);
    for (what, cut) in [("in the header", 100), ("in the frames", 300)] {
        let dir = Dir::new();
        let input = [&batches[0][..], &batches[1], &batches[2][..cut]].concat();
        let out = dir.append(3, &[], &input);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{what}: {stderr}");
        assert!(stderr.contains("batch 2"), "{what}: {stderr}");
        let at = (batches[0].len() + batches[1].len()).to_string();
        assert!(
            stderr.contains(&at),
            "{what}: names stdin byte {at}: {stderr}"
        );
        assert_eq!(acks(&out.stdout).len(), 2, "{what}");
        assert_eq!(split(&dir.poll_ok(3, &["--first"])).len(), 2, "{what}");
    }
}

#[test]
fn an_empty_stream_stores_nothing_and_succeeds() {
    let dir = Dir::new();
    let out = dir.append(1, &[], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn fsync_policies_are_accepted_and_bad_ones_refused_with_a_message() {
    let (_, input) = stream(7, 5);
    for policy in ["never", "batch", "interval:5"] {
        let dir = Dir::new();
        let acks = dir.append_ok(1, &["--fsync", policy], &input);
        assert_eq!(acks.len(), 5, "--fsync {policy}");
        assert_eq!(split(&dir.poll_ok(1, &["--first"])).len(), 5);
    }
    for bad in [
        "always",
        "interval:0",
        "interval:",
        "interval:x",
        "Batch",
        "",
    ] {
        let dir = Dir::new();
        let out = dir.append(1, &["--fsync", bad], &input);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "--fsync {bad:?} accepted");
        assert!(
            stderr.contains("invalid fsync policy"),
            "--fsync {bad:?}: {stderr}"
        );
        assert!(
            stderr.contains("interval:MS"),
            "says what is accepted: {stderr}"
        );
        assert!(out.stdout.is_empty());
        assert!(
            !dir.partition(1).exists(),
            "--fsync {bad:?}: nothing stored"
        );
    }
}

#[test]
fn append_acknowledges_a_batch_before_the_stream_goes_on() {
    // A producer that waits for each acknowledgement before sending more.
    let _watchdog =
        common::Watchdog::arm("interactive append", std::time::Duration::from_secs(120));
    let dir = Dir::new();
    for fsync in ["never", "batch"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corelog"))
            .args([
                "append",
                "--dir",
                dir.arg(),
                "--partition",
                "4",
                "--fsync",
                fsync,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for seq in 0..3 {
            stdin.write_all(&batch(8, seq)).unwrap();
            stdin.flush().unwrap();
            let line = lines.next().unwrap().unwrap();
            let ack = acks(line.as_bytes())[0];
            assert_eq!(
                ack.messages,
                messages_in(seq),
                "--fsync {fsync} batch {seq}"
            );
        }
        drop(stdin);
        assert!(lines.next().is_none());
        assert!(child.wait().unwrap().success());
    }
}

/// A partition in small segments: returns the segment files.
fn many_segments(dir: &Dir, p: u64) -> Vec<PathBuf> {
    let (_, input) = stream(9, 30);
    dir.append_ok(p, &["--segment-bytes", "4KiB"], &input);
    let segments = dir.segments(p);
    assert!(segments.len() >= 3, "rotation happened: {segments:?}");
    segments
}

/// Byte positions of the batches in a segment file.
fn positions(bytes: &[u8]) -> Vec<usize> {
    let mut pos = 0;
    let mut out = Vec::new();
    for b in split(bytes) {
        out.push(pos);
        pos += b.len();
    }
    out
}

fn verify(dir: &Dir) -> (Option<i32>, String) {
    let out = corelog(&["verify", "--dir", dir.arg()], b"");
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

#[test]
fn verify_passes_a_sound_directory() {
    let dir = Dir::new();
    many_segments(&dir, 0);
    dir.append_ok(1, &[], &stream(1, 3).1);
    let (code, out) = verify(&dir);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("partition 0:") && out.contains("partition 1:"),
        "{out}"
    );
    let (code, out) = {
        let o = corelog(&["verify", "--dir", dir.arg(), "--partition", "1"], b"");
        (o.status.code(), text(&o.stdout))
    };
    assert_eq!(code, Some(0));
    assert!(!out.contains("partition 0:"), "--partition narrows: {out}");
    // A poll (which opens the engine) leaves it sound.
    dir.poll_ok(0, &["--first"]);
    assert_eq!(verify(&dir).0, Some(0));
}

#[test]
fn verify_names_the_file_and_position_of_a_corrupt_byte_in_a_sealed_segment() {
    let dir = Dir::new();
    let segments = many_segments(&dir, 0);
    let sealed = &segments[0];
    let mut bytes = std::fs::read(sealed).unwrap();
    let at = positions(&bytes)[1];
    // The first payload byte of the second batch's first message.
    bytes[at + 256 + 48] ^= 0x01;
    std::fs::write(sealed, &bytes).unwrap();
    let (code, out) = verify(&dir);
    assert!(code.is_some_and(|c| c != 0), "{out}");
    let finding = format!("{} at byte {at}", sealed.display());
    assert!(out.contains(&finding), "names {finding}: {out}");
    assert!(out.contains("checksum"), "says what is wrong: {out}");
    // Verify repairs nothing.
    assert_eq!(std::fs::read(sealed).unwrap(), bytes);
}

#[test]
fn verify_reports_a_torn_tail_without_repairing_it() {
    let dir = Dir::new();
    let segments = many_segments(&dir, 0);
    let last = segments.last().unwrap();
    let bytes = std::fs::read(last).unwrap();
    let at = *positions(&bytes).last().unwrap();
    let cut = at + 100;
    assert!(cut < bytes.len(), "the cut is inside the last batch");
    std::fs::write(last, &bytes[..cut]).unwrap();
    let snapshot: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir.partition(0))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let (code, out) = verify(&dir);
    assert!(code.is_some_and(|c| c != 0), "{out}");
    let finding = format!("{} at byte {at}", last.display());
    assert!(out.contains(&finding), "names {finding}: {out}");
    let cut = format!(
        "recovery at the next open will: 8 segments, next offset 71, 29 batches verified; cut {} at byte {at} ({} bytes dropped",
        last.display(),
        cut - at
    );
    assert!(out.contains(&cut), "says what recovery will cut: {out}");
    for (p, b) in snapshot {
        assert_eq!(std::fs::read(&p).unwrap(), b, "{} unchanged", p.display());
    }
    // Reported again: nothing was repaired.
    assert_eq!(verify(&dir).0, code);
}

#[test]
fn dump_prints_every_batch_and_with_messages_every_message_offset() {
    let dir = Dir::new();
    many_segments(&dir, 2);
    let total: u64 = (0..30).map(messages_in).sum();
    let out = corelog(&["dump", "--dir", dir.arg(), "--messages"], b"");
    assert!(out.status.success());
    let out = text(&out.stdout);
    let offsets: Vec<u64> = out
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("offset "))
        .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(offsets, (0..total).collect::<Vec<_>>(), "{out}");
    let batches = out
        .lines()
        .filter(|l| l.trim_start().starts_with("batch @"))
        .count();
    assert_eq!(batches, 30);
    for s in dir.segments(2) {
        assert!(
            out.contains(&s.display().to_string()),
            "names {}",
            s.display()
        );
    }
    // Without --messages: the batches, no messages.
    let out = text(&corelog(&["dump", "--dir", dir.arg(), "--partition", "2"], b"").stdout);
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with("batch @"))
            .count(),
        30
    );
    assert!(!out.lines().any(|l| l.trim_start().starts_with("offset ")));
}

#[test]
fn errors_name_the_file_or_the_partition() {
    let dir = Dir::new();
    let missing = dir.path().join("nowhere");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["verify", "--dir", m],
        vec!["dump", "--dir", m],
        vec!["poll", "--dir", m, "--partition", "0", "--first"],
    ] {
        let out = corelog(&args, b"");
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(m),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    dir.append_ok(0, &[], &batch(0, 0));
    let out = corelog(&["verify", "--dir", dir.arg(), "--partition", "9"], b"");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("partition 9"),
        "{}",
        text(&out.stderr)
    );
    let out = dir.poll(0, &[]);
    assert!(!out.status.success(), "poll needs a starting point");
}

#[test]
fn every_command_has_help() {
    for cmd in [
        None,
        Some("append"),
        Some("poll"),
        Some("verify"),
        Some("dump"),
    ] {
        let args: Vec<&str> = cmd.into_iter().chain(["--help"]).collect();
        let out = corelog(&args, b"");
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{args:?}");
        let usage = match cmd {
            Some(c) => format!("Usage: corelog {c}"),
            None => "Usage: corelog".to_string(),
        };
        assert!(stdout.contains(&usage), "{args:?}: {stdout}");
        if let Some(c) = cmd {
            assert!(stdout.contains("--dir"), "{c}: {stdout}");
        }
    }
    let out = text(&corelog(&["poll", "--help"], b"").stdout);
    for flag in [
        "--offset",
        "--timestamp",
        "--first",
        "--last",
        "--max-bytes",
    ] {
        assert!(out.contains(flag), "poll --help mentions {flag}");
    }
    let out = text(&corelog(&["append", "--help"], b"").stdout);
    for flag in ["--partition", "--segment-bytes", "--fsync"] {
        assert!(out.contains(flag), "append --help mentions {flag}");
    }
}
