//! One cycle: start `corelog append`, feed it, read its acknowledgements
//! and end it (SIGKILL early, SIGKILL after some acknowledgements, or a
//! clean close).

use crate::ack::{parse_ack, Ack, Pending};
use crate::harness::{Harness, STALL};
use crate::stream::{message_count, producer_batch};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a cycle's child ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End {
    /// SIGKILL this long after it started, whatever it did.
    Early(Duration),
    /// SIGKILL once it acknowledged this many batches, then a short while.
    AfterAcks(u64, Duration),
    /// Close its stdin and let it finish.
    Clean,
}

impl Harness {
    /// Runs one child and ends it; records what it acknowledged.
    pub(crate) fn cycle(&mut self, cycle: u64) -> Result<(), String> {
        let n = self.rng.u64(1..=self.args.max_batches);
        let segment_bytes = match self.rng.u32(0..6) {
            0..=2 => None,
            3 => Some(4096),
            4 => Some(16 << 10),
            _ => Some(self.rng.u64(2048..=65536)),
        };
        let end = match self.rng.u32(0..20) {
            0..=1 => End::Early(Duration::from_micros(self.rng.u64(0..30_000))),
            2 => End::Clean,
            _ => End::AfterAcks(
                self.rng.u64(0..=n),
                Duration::from_micros(self.rng.u64(0..3_000)),
            ),
        };
        let bursts = self.rng.u64(1..=16);
        let pause = Duration::from_micros(self.rng.u64(0..=500));

        let mut cmd = Command::new(&self.corelog);
        cmd.arg("append")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--partition")
            .arg(self.args.partition.to_string())
            .arg("--fsync")
            .arg("batch");
        if let Some(s) = segment_bytes {
            cmd.arg("--segment-bytes").arg(s.to_string());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cycle {cycle}: cannot start {}: {e}",
                    self.corelog.display()
                )
            })?;
        let started = Instant::now();
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(format!("cycle {cycle}: child without pipes")),
            };
        let close_stdin = matches!(end, End::Clean);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || feed(stdin, cycle, n, bursts, pause, close_stdin, stop))
        };
        let (tx, rx) = mpsc::channel::<Result<Ack, String>>();
        let partition = self.args.partition;
        let reader = std::thread::spawn(move || read_acks(stdout, partition, tx));
        let errors = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut s);
            s
        });

        let mut acks: Vec<Ack> = Vec::new();
        let mut failure: Option<String> = None;
        let mut exited = None;
        match end {
            End::Early(after) => {
                std::thread::sleep(after);
                self.totals.kills_early += 1;
            }
            End::AfterAcks(k, after) => {
                let mut last = Instant::now();
                while (acks.len() as u64) < k {
                    match rx.recv_timeout(Duration::from_millis(100)) {
                        Ok(Ok(a)) => {
                            acks.push(a);
                            last = Instant::now();
                        }
                        Ok(Err(e)) => {
                            failure = Some(e);
                            break;
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if let Ok(Some(status)) = child.try_wait() {
                                exited = Some(status);
                                break;
                            }
                            if last.elapsed() > STALL {
                                failure = Some(format!(
                                    "cycle {cycle}: no acknowledgement for {STALL:?} after {} of {n}: the child hangs",
                                    acks.len()
                                ));
                                break;
                            }
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                spin(after);
                self.totals.kills_mid += 1;
            }
            End::Clean => {}
        }
        let status = match end {
            End::Clean => {
                wait_with_deadline(&mut child, STALL).map_err(|e| format!("cycle {cycle}: {e}"))?
            }
            _ => {
                let _ = child.kill();
                child
                    .wait()
                    .map_err(|e| format!("cycle {cycle}: waiting for the child: {e}"))?
            }
        };
        stop.store(true, Ordering::SeqCst);
        let sent = writer.join().unwrap_or(0);
        let _ = reader.join();
        let stderr = errors.join().unwrap_or_default();
        for a in rx.try_iter() {
            match a {
                Ok(a) => acks.push(a),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            return Err(format!("{e}\nchild stderr:\n{stderr}"));
        }
        if let Some(status) = exited {
            return Err(format!(
                "cycle {cycle}: the child exited by itself ({status}) before it was killed; stderr:\n{stderr}"
            ));
        }
        if matches!(end, End::Clean) {
            self.totals.clean_exits += 1;
            if !status.success() || acks.len() as u64 != n {
                return Err(format!(
                    "cycle {cycle}: a clean run of {n} batches ended {status} with {} acknowledgements; stderr:\n{stderr}",
                    acks.len()
                ));
            }
        }
        if acks.len() as u64 > sent {
            return Err(format!(
                "cycle {cycle}: {} acknowledgements for {sent} batches sent",
                acks.len()
            ));
        }
        for (seq, a) in acks.iter().enumerate() {
            let b = producer_batch(cycle, seq as u64);
            let count = message_count(&b);
            if a.messages != count || a.bytes != b.len() as u64 {
                return Err(format!(
                    "cycle {cycle}: acknowledgement {seq} {a:?} does not describe batch {seq} ({count} messages, {} bytes)",
                    b.len()
                ));
            }
            if seq > 0 && a.base_offset != acks[seq - 1].base_offset + acks[seq - 1].messages {
                return Err(format!(
                    "cycle {cycle}: acknowledgement {seq} {a:?} does not follow {:?}",
                    acks[seq - 1]
                ));
            }
        }
        if self.args.verbose {
            println!(
                "cycle {cycle}: {end:?}, segments {segment_bytes:?}, {sent} of {n} batches sent, {} acknowledged, {:.0} ms",
                acks.len(),
                started.elapsed().as_secs_f64() * 1000.0
            );
        }
        self.totals.sent += sent;
        self.totals.acked += acks.len() as u64;
        self.pending.push(Pending { cycle, sent, acks });
        Ok(())
    }
}

/// Writes batches `0..n` of `cycle` in `bursts` bursts; returns how many
/// were written whole. Then closes stdin when `close`, or holds it open
/// (the child waits for more input) until `stop` is set.
pub(crate) fn feed(
    mut stdin: std::process::ChildStdin,
    cycle: u64,
    n: u64,
    bursts: u64,
    pause: Duration,
    close: bool,
    stop: Arc<AtomicBool>,
) -> u64 {
    let per = n.div_ceil(bursts).max(1);
    let mut written = 0;
    for seq in 0..n {
        if stop.load(Ordering::SeqCst) || stdin.write_all(&producer_batch(cycle, seq)).is_err() {
            return written;
        }
        written += 1;
        if (seq + 1) % per == 0 {
            std::thread::sleep(pause);
        }
    }
    if !close {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    written
}

/// Sends every whole acknowledgement line; a partial last line (the child
/// died writing it) acknowledges nothing.
fn read_acks(
    stdout: std::process::ChildStdout,
    partition: u64,
    tx: mpsc::Sender<Result<Ack, String>>,
) {
    let mut r = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.last() != Some(&b'\n') => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if tx.send(parse_ack(&text, partition)).is_err() {
                    return;
                }
            }
        }
    }
}

fn wait_with_deadline(
    child: &mut Child,
    limit: Duration,
) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Ok(s),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                return Err(format!(
                    "the child did not finish within {limit:?}: it hangs"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
    }
}

/// Waits `d` without giving the CPU away (a kill a few microseconds after
/// an acknowledgement lands mid-write more often than one after a sleep).
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}
