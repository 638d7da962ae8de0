//! Each subcommand's arguments.

use clap::Args;
use corelog::cli::parse_size;
use corelog::FsyncPolicy;
use std::path::PathBuf;

#[derive(Args)]
pub(crate) struct AppendArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Partition id (created if new).
    #[arg(long)]
    pub(crate) partition: u64,
    /// Seal segments at this size (e.g. 1GiB, 64MiB, 1048576).
    #[arg(long, value_parser = parse_size, default_value = "1GiB")]
    pub(crate) segment_bytes: u64,
    /// never | batch | interval:MS. With batch, a line is printed only once
    /// its batch is durable.
    #[arg(long, default_value = "never")]
    pub(crate) fsync: FsyncPolicy,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["offset", "timestamp", "first", "last"])))]
pub(crate) struct PollArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Partition id.
    #[arg(long)]
    pub(crate) partition: u64,
    /// Start at the batch holding this offset.
    #[arg(long)]
    pub(crate) offset: Option<u64>,
    /// Start at the first batch stamped at or after this time (µs).
    #[arg(long)]
    pub(crate) timestamp: Option<u64>,
    /// Start at the first batch.
    #[arg(long)]
    pub(crate) first: bool,
    /// Return the last batch.
    #[arg(long)]
    pub(crate) last: bool,
    /// Whole batches up to this many bytes (at least one).
    #[arg(long, value_parser = parse_size, default_value = "1MiB")]
    pub(crate) max_bytes: u64,
    /// Do not verify the batches served (only their lengths and offsets).
    #[arg(long)]
    pub(crate) no_verify: bool,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<u64>,
    /// Also check what the object store holds for the partitions (the
    /// server's --tier, s3://BUCKET/PREFIX): every remote segment
    /// downloaded and checked whole, and the store's log meeting the local
    /// one. Credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    #[arg(long)]
    pub(crate) tier: Option<String>,
    /// The endpoint of an S3-compatible store (http://host:port).
    #[arg(long, requires = "tier")]
    pub(crate) tier_endpoint: Option<String>,
}

#[derive(Args)]
pub(crate) struct DumpArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<u64>,
    /// Print every message too.
    #[arg(long)]
    pub(crate) messages: bool,
}

#[derive(Args)]
pub(crate) struct RepairArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The partition to repair.
    #[arg(long)]
    pub(crate) partition: u64,
}

#[derive(Args)]
pub(crate) struct TierStatusArgs {
    /// Data directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The tier, as the server was given it: s3://BUCKET/PREFIX
    /// (credentials and region from AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION).
    #[arg(long)]
    pub(crate) tier: String,
    /// The endpoint of an S3-compatible store (http://host:port).
    #[arg(long)]
    pub(crate) tier_endpoint: Option<String>,
    /// Only this partition.
    #[arg(long)]
    pub(crate) partition: Option<u64>,
    /// Also download every remote segment and check it: its XXH3 against
    /// the manifest's, and every batch (layout, checksums, offsets).
    #[arg(long)]
    pub(crate) verify: bool,
}
