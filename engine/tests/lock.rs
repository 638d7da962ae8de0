//! The data directory lock: one engine per directory, in this process and
//! across processes; the refusal names the directory and the holder's pid;
//! shutdown (or drop) releases it.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, corelog, open};
use corelog::{Config, Engine, LogConfig, OpenError};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn open_again(dir: &Path) -> Result<Engine, OpenError> {
    Engine::open(Config {
        open_partitions: corelog::OpenPartitions::AtOpen,
        shards: Some(1),
        pin_threads: false,
        ..Config::new(dir)
    })
}

/// Runs the `corelog` tool, which must succeed.
fn corelog_ok(args: &[&str], stdin: &[u8]) {
    let out = corelog(args, stdin);
    assert!(
        out.status.success(),
        "corelog {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_lock_held(result: Result<Engine, OpenError>, dir: &Path) {
    match result {
        Err(OpenError::LockHeld { dir: d, holder }) => {
            assert_eq!(d, dir);
            assert_eq!(
                holder,
                Some(std::process::id()),
                "the holder's pid, from the lock file"
            );
        }
        other => panic!("expected LockHeld, got {other:?}"),
    }
}

#[test]
fn a_second_engine_in_the_same_process_is_refused() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 2, LogConfig::default());
    engine.handle().append(0, batch(0, 0)).wait().unwrap();
    let second = open_again(dir.path());
    assert_lock_held(second, dir.path());
    let message = open_again(dir.path()).unwrap_err().to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    // The refused open changed nothing: the first engine keeps working.
    engine.handle().append(0, batch(0, 1)).wait().unwrap();
    engine.shutdown().unwrap();

    // Released by shutdown.
    let engine = open_again(dir.path()).unwrap();
    assert_eq!(engine.handle().stats(0).wait().unwrap().next_offset, 1 + 2);
    // And by drop.
    drop(engine);
    open_again(dir.path()).unwrap().shutdown().unwrap();
}

#[test]
fn another_process_is_refused_naming_the_directory_and_the_holder() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), 1, LogConfig::default());
    engine.handle().append(0, batch(0, 0)).wait().unwrap();
    let d = dir.path().to_str().unwrap();
    let before = std::fs::read(dir.path().join("partitions/0/00000000000000000000.log")).unwrap();
    for args in [
        &["append", "--dir", d, "--partition", "0"][..],
        &["poll", "--dir", d, "--partition", "0", "--first"],
        &["verify", "--dir", d],
        &["dump", "--dir", d],
    ] {
        let out = corelog(args, &batch(0, 9));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran on a held directory");
        assert!(
            out.stdout.is_empty(),
            "{args:?} printed {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains(d),
            "{args:?}: stderr names the directory: {stderr}"
        );
        assert!(
            stderr.contains(&format!("pid {}", std::process::id())),
            "{args:?}: stderr names the holder: {stderr}"
        );
    }
    // Nothing was appended behind the engine's back.
    let after = std::fs::read(dir.path().join("partitions/0/00000000000000000000.log")).unwrap();
    assert_eq!(after, before);
    assert_eq!(engine.handle().stats(0).wait().unwrap().next_offset, 1);
    engine.shutdown().unwrap();

    // Released: the same commands now run.
    let out = corelog(&["verify", "--dir", d], &batch(0, 9));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = corelog(&["append", "--dir", d, "--partition", "0"], &batch(0, 9));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            r#"{{"partition":0,"base_offset":1,"messages":{},"bytes":{}}}"#,
            common::messages_in(9),
            batch(0, 9).len()
        )
    );
}

#[test]
fn a_cli_run_holds_the_lock_while_it_runs_and_a_killed_one_leaves_it_free() {
    let _serial = common::serial();
    let _watchdog =
        common::Watchdog::arm("lock held by a child", std::time::Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelog"))
        .args(["append", "--dir", d, "--partition", "3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&batch(3, 0)).unwrap();
    stdin.flush().unwrap();
    // Its acknowledgement: the child has the directory and stored the batch.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(
        line.trim(),
        format!(
            r#"{{"partition":3,"base_offset":0,"messages":1,"bytes":{}}}"#,
            batch(3, 0).len()
        )
    );
    match open_again(dir.path()) {
        Err(OpenError::LockHeld { dir: held, holder }) => {
            assert_eq!(held, dir.path());
            assert_eq!(
                holder,
                Some(child.id()),
                "the refusal names the child's pid"
            );
        }
        other => panic!("expected LockHeld, got {other:?}"),
    }
    // A process that dies without shutting down releases the lock with it;
    // what it acknowledged is in the page cache, so it survives.
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    let engine = open_again(dir.path()).unwrap();
    assert!(engine.recovery().iter().all(|r| r.result.is_ok()));
    assert_eq!(engine.handle().stats(3).wait().unwrap().next_offset, 1);
    engine.shutdown().unwrap();
}

#[test]
fn a_finished_cli_run_leaves_the_directory_free() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    corelog_ok(&["append", "--dir", d, "--partition", "3"], &batch(0, 9));
    let engine = open_again(dir.path()).unwrap();
    assert_eq!(
        engine.handle().stats(3).wait().unwrap().next_offset,
        common::messages_in(9)
    );
    engine.shutdown().unwrap();
}

/// The read-only tools take the lock shared and create nothing: on a
/// directory no engine left a lock file in (copied without it), `verify`
/// runs and leaves none; a lock file that cannot be opened is an error
/// naming it, never a reason to read unlocked.
#[test]
fn a_read_creates_no_lock_file_and_an_unreadable_one_is_an_error() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    corelog_ok(&["append", "--dir", d, "--partition", "3"], &batch(0, 9));
    let lock = dir.path().join(".lock");
    std::fs::remove_file(&lock).unwrap();
    corelog_ok(&["verify", "--dir", d], b"");
    assert!(!lock.exists(), "a read created the lock file");
    // A lock file that loops (ELOOP on open): refused, naming it.
    std::os::unix::fs::symlink(&lock, &lock).unwrap();
    let out = corelog(&["verify", "--dir", d], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "verify read without its lock");
    assert!(err.contains(".lock"), "{err}");
}
