//! The `corelog-server` binary: starts, serves, and on SIGTERM or SIGINT
//! drains, syncs, releases the directory and exits 0.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the binary on an ephemeral port; returns it and its address,
/// read from its "listening on" log line.
fn spawn(dir: &std::path::Path) -> (Child, std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelog-server"))
        .args([
            "--dir",
            dir.to_str().expect("utf-8 path"),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--shards", "2", "--fsync", "batch"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn corelog-server");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let drain = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("listening on ") {
                let rest = &line[at + "listening on ".len()..];
                let addr = rest.split([',', ' ']).next().unwrap_or_default().to_owned();
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server logs its address")
        .parse()
        .expect("address");
    (child, addr, drain)
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn signals_shut_the_server_down_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let (mut child, addr, drain) = spawn(dir.path());
        let mut raw = common::raw::Raw::connect(addr);
        assert_eq!(raw.login("iggy", "iggy"), 0);
        let pid = libc::pid_t::try_from(child.id()).expect("pid");
        assert_eq!(send_signal(pid, signal), 0);
        let status = wait_exit(&mut child);
        assert!(
            status.success(),
            "exit status {status:?} after signal {signal}"
        );
        drain.join().expect("stderr drained");
        assert!(raw.closed_by_server());
    }
    // The directory was released: an engine can open it.
    let engine = corelog::Engine::open(corelog::Config::new(dir.path())).expect("reopen");
    engine.shutdown().expect("shutdown");
}

/// Sends `signal` with the `kill` command (no `unsafe` in tests).
fn send_signal(pid: libc::pid_t, signal: i32) -> i32 {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    if status.success() {
        0
    } else {
        -1
    }
}
