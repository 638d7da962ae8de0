//! The cluster file and the replication settings.
//!
//! ```toml
//! shards = 2            # data groups, one per shard index (the same on every node)
//! secret_file = "cluster.secret"  # peers prove they hold it (net/auth.rs); relative
//!                                 # to this file; at least 32 bytes, 0600; the same on every node
//! [[node]]
//! id = 1
//! client = "127.0.0.1:8091"    # where clients reach this node
//! replica = "127.0.0.1:9091"   # where its peers reach it
//! ```

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAddr {
    /// Its id (> 0, unique).
    pub id: u64,
    /// Where clients reach it.
    pub client: SocketAddr,
    /// Where its peers reach it.
    pub replica: SocketAddr,
}

/// Every node of the cluster, and the number of data groups.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Data groups (one per shard index); every node runs this many shards.
    #[serde(default = "default_shards")]
    pub shards: usize,
    /// The nodes.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeAddr>,
    /// The file holding the cluster's secret (read by `read`).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// The secret peers prove they hold (`None`: the replica port is
    /// open to anyone who reaches it).
    #[serde(skip)]
    pub secret: Option<Secret>,
}

/// A cluster's shared secret: at least [`Secret::MIN_LEN`] bytes, never
/// printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// The fewest bytes a secret may have: one captured handshake lets an
    /// eavesdropper test guesses offline, so a secret must be random and
    /// long, such as `head -c 32 /dev/urandom | base64 > cluster.secret`
    /// (44 bytes).
    pub const MIN_LEN: usize = 32;

    /// A secret of `bytes`; `None` when shorter than [`Secret::MIN_LEN`].
    pub fn new(bytes: Vec<u8>) -> Option<Secret> {
        (bytes.len() >= Self::MIN_LEN).then_some(Secret(bytes))
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

fn default_shards() -> usize {
    2
}

/// Why a cluster file is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// the file
        path: String,
        /// the error
        source: std::io::Error,
    },
    /// The file is not a cluster description.
    #[error("{path}: {source}")]
    Parse {
        /// the file
        path: String,
        /// the error
        source: toml::de::Error,
    },
    /// The secret file may be read by others than its owner.
    #[error("secret_file {path}: mode {mode:o} lets others than its owner read it (chmod 600 it)")]
    SecretReadable {
        /// the file
        path: String,
        /// its permission bits
        mode: u32,
    },
    /// The secret is too short to resist offline guessing.
    #[error("secret_file {path}: {len} bytes, fewer than {min} (make one with `head -c 32 /dev/urandom | base64 > FILE`)")]
    SecretShort {
        /// the file
        path: String,
        /// its length (trailing whitespace removed)
        len: usize,
        /// the fewest allowed
        min: usize,
    },
    /// The description is inconsistent.
    #[error("cluster: {0}")]
    Invalid(Inconsistency),
}

/// What makes a cluster description inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Inconsistency {
    /// No node.
    #[error("no [[node]]")]
    NoNodes,
    /// A shard count out of range.
    #[error("shards = {0} (1..=256)")]
    Shards(usize),
    /// Ids start at 1.
    #[error("node id 0 (ids start at 1)")]
    ZeroId,
    /// An id given twice.
    #[error("two nodes share id {0}")]
    SharedId(u64),
    /// An address given twice.
    #[error("two endpoints share address {0}")]
    SharedAddress(SocketAddr),
}

/// Reads a secret file: only its owner may read it (as ssh asks of a
/// private key), and it must hold at least [`Secret::MIN_LEN`] bytes
/// (trailing whitespace removed).
fn read_secret(f: &Path) -> Result<Secret, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let shown = f.display().to_string();
    let read = |source| ConfigError::Read {
        path: shown.clone(),
        source,
    };
    let mode = std::fs::metadata(f).map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ConfigError::SecretReadable { path: shown, mode });
    }
    let mut bytes = std::fs::read(f).map_err(read)?;
    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
        bytes.pop();
    }
    let len = bytes.len();
    Secret::new(bytes).ok_or(ConfigError::SecretShort {
        path: shown,
        len,
        min: Secret::MIN_LEN,
    })
}

impl ClusterConfig {
    /// Reads and checks a cluster file.
    pub fn read(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut c: ClusterConfig = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: shown,
            source,
        })?;
        if let Some(f) = &c.secret_file {
            let f = path.parent().unwrap_or(Path::new(".")).join(f);
            c.secret = Some(read_secret(&f)?);
        }
        c.check()?;
        Ok(c)
    }

    /// Checks ids, addresses and the group count.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |i: Inconsistency| Err(ConfigError::Invalid(i));
        if self.nodes.is_empty() {
            return bad(Inconsistency::NoNodes);
        }
        if self.shards == 0 || self.shards > 256 {
            return bad(Inconsistency::Shards(self.shards));
        }
        let mut ids: Vec<u64> = self.nodes.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        if ids.first() == Some(&0) {
            return bad(Inconsistency::ZeroId);
        }
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return bad(Inconsistency::SharedId(w[0]));
        }
        let mut addrs: Vec<SocketAddr> = self
            .nodes
            .iter()
            .flat_map(|n| [n.client, n.replica])
            .collect();
        addrs.sort_unstable();
        if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
            return bad(Inconsistency::SharedAddress(w[0]));
        }
        Ok(())
    }

    /// The node with `id`.
    pub fn node(&self, id: u64) -> Option<&NodeAddr> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Every node id, sorted.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.nodes.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        ids
    }
}

/// How the replication runs.
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    /// One Raft tick.
    pub tick: Duration,
    /// Ticks without a leader's heartbeat before an election (randomised up
    /// to twice this).
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// Whether the journal is fsynced before an entry counts as held
    /// (`fsync=batch`: a send is acknowledged once on a majority's disks).
    pub sync: bool,
    /// Without `sync`: fsync the journals this often anyway (`fsync=interval:MS`);
    /// `None`: never (`fsync=never`, the OS writes back).
    pub sync_every: Option<Duration>,
    /// A group's journal is compacted past this many bytes of entries
    /// held in memory (after the partitions it applied to are flushed,
    /// under a policy that does not sync each write).
    pub compact_bytes: u64,
    /// How long a send waits for its entry to commit before it is answered
    /// "not committed" (its outcome unknown).
    pub commit_timeout: Duration,
    /// Without `sync`: a leader sends each entry's batch of at least this
    /// many bytes to its followers from the segment file it wrote
    /// (`sendfile`, no copy through user memory), once written;
    /// `None` (the default): every byte from memory, as soon as proposed.
    /// Under `sync` the leader sends from memory before its own write and
    /// sync. Off by default: between nodes on one host (loopback) the
    /// sender's copy saved was paid back on the receiving side
    /// (docs/bench/cluster-profile.md).
    pub send_by_reference: Option<usize>,
}

impl Default for ReplicaOptions {
    fn default() -> Self {
        ReplicaOptions {
            tick: Duration::from_millis(50),
            election_ticks: 10,
            heartbeat_ticks: 2,
            sync: true,
            sync_every: None,
            compact_bytes: 64 << 20,
            commit_timeout: Duration::from_secs(10),
            send_by_reference: None,
        }
    }
}

impl ReplicaOptions {
    /// The partition-log settings of the engine a replica runs on, from
    /// `base`: a commit mark (`commit_gate`: a batch is written before its
    /// entry commits, and served only after), and the fsync policy that
    /// makes a batch as durable as the journal's pointer to it (`batch`
    /// under `sync`, `interval` under `sync_every`, else `never`). The
    /// partition logs are the replicated log: each byte is written once.
    pub fn log_config(&self, base: corelog::LogConfig) -> corelog::LogConfig {
        let fsync = match (self.sync, self.sync_every) {
            (true, _) => corelog::FsyncPolicy::Batch,
            (false, Some(every)) => corelog::FsyncPolicy::Interval(every),
            (false, None) => corelog::FsyncPolicy::Never,
        };
        corelog::LogConfig {
            commit_gate: true,
            fsync,
            ..base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_issue_example_and_refuses_duplicates() {
        let text = r#"
            [[node]]
            id = 1
            client = "127.0.0.1:8091"
            replica = "127.0.0.1:9091"
            [[node]]
            id = 2
            client = "127.0.0.1:8092"
            replica = "127.0.0.1:9092"
        "#;
        let c: ClusterConfig = toml::from_str(text).expect("parse");
        c.check().expect("valid");
        assert_eq!(c.ids(), vec![1, 2]);
        assert_eq!(c.shards, 2);
        let dup = text.replace("id = 2", "id = 1");
        let c: ClusterConfig = toml::from_str(&dup).expect("parse");
        assert!(c.check().is_err());
        let same = text.replace("8092", "8091");
        let c: ClusterConfig = toml::from_str(&same).expect("parse");
        assert!(c.check().is_err());
    }

    #[test]
    fn reads_the_secret_beside_the_file_and_refuses_a_short_or_readable_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("corelog-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("cluster.toml");
        std::fs::write(
            &file,
            "secret_file = \"s\"\n[[node]]\nid = 1\nclient = \"127.0.0.1:1\"\nreplica = \"127.0.0.1:2\"\n",
        )
        .expect("write");
        let secret = dir.join("s");
        let write = |text: &str, mode: u32| {
            std::fs::write(&secret, text).expect("write");
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(mode))
                .expect("chmod");
        };
        let good = "0123456789abcdef0123456789abcdef";
        write(&format!("{good}\n"), 0o600);
        let c = ClusterConfig::read(&file).expect("read");
        assert_eq!(c.secret.as_ref().map(Secret::bytes), Some(good.as_bytes()));
        assert_eq!(format!("{:?}", c.secret), "Some(Secret(..))");
        write(&format!("{good}\n"), 0o400);
        ClusterConfig::read(&file).expect("owner-only read is enough");
        for mode in [0o640, 0o604, 0o644] {
            write(&format!("{good}\n"), mode);
            let e = ClusterConfig::read(&file).expect_err("readable by others");
            assert!(
                matches!(e, ConfigError::SecretReadable { mode: m, .. } if m == mode),
                "{mode:o}: {e}"
            );
        }
        // 31 bytes: short of a 32-byte secret.
        write(&format!("{}\n", &good[..31]), 0o600);
        let e = ClusterConfig::read(&file).expect_err("short");
        assert!(
            matches!(
                e,
                ConfigError::SecretShort {
                    len: 31,
                    min: 32,
                    ..
                }
            ),
            "{e}"
        );
        std::fs::remove_file(&secret).expect("rm");
        let e = ClusterConfig::read(&file).expect_err("missing");
        assert!(e.to_string().contains("/s"), "{e}");
        std::fs::remove_dir_all(&dir).expect("rm");
    }
}
