//! GET_STATS (the SDK and Iggy's bench need a well-formed answer),
//! GET_CLUSTER_METADATA, DESCRIBE_OPTIONS and GET_SNAPSHOT_FILE.

use super::outcome::Outcome;
use super::topics::{partition_stats, totals};
use crate::commands::snapshot::{SnapshotError, Subject};
use crate::node::context::{now_micros, Context};
use crate::node::process;
use iggy_binary_protocol::requests::system::GetSnapshotRequest;
use iggy_binary_protocol::requests::system::OPTIONS_SCOPE_TOPIC;
use iggy_binary_protocol::responses::system::get_cluster_metadata::{
    ClusterMetadataResponse, ClusterNodeResponse,
};
use iggy_binary_protocol::responses::system::get_stats::StatsResponse;
use iggy_binary_protocol::responses::system::DescribeOptionsResponse;
use iggy_common::{ClusterNodeRole, ClusterNodeStatus};
use iggy_common::{IggyError, SnapshotCompression, SystemSnapshotType};

/// What the server can say about itself cheaply: counts from the catalog,
/// messages, their bytes and segment files summed over the partitions'
/// engine stats (one message to each partition's shard), times, the host
/// (its memory, the data directory's file system space), and this process
/// as the kernel counts it (resident memory, threads, storage bytes read
/// and written: Iggy's sources for the same fields). What Iggy's stats have
/// no field for, the engine's metrics (per shard appends, latencies,
/// fdatasyncs, polls, queue depth) and the client counters (connections
/// refused and closed by reason, failed sign-ins, refused requests, network
/// bytes), is in GET_SNAPSHOT_FILE's `resource_usage` section (`iggy
/// snapshot`), and logged at shutdown.
pub(super) async fn stats(ctx: &Context) -> Outcome {
    let catalog = ctx.metadata.snapshot();
    let topics: usize = catalog.streams.iter().map(|s| s.topics.len()).sum();
    let ids: Vec<u64> = catalog.all_partitions().collect();
    let partitions = ids.len();
    let engine = partition_stats(ctx, &ids).await;
    let (messages_size_bytes, messages_count) = totals(&engine);
    let segments: usize = engine.iter().flatten().map(|s| s.segments).sum();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let kernel = read("/proc/sys/kernel/osrelease");
    let now = now_micros();
    let (read_bytes, written_bytes) = process::storage_io();
    let (total_memory, available_memory) = process::host_memory();
    let (free_disk_space, total_disk_space) = process::disk_space(&ctx.dir);
    Outcome::encoded(&StatsResponse {
        process_id: std::process::id(),
        cpu_usage: 0.0,
        total_cpu_usage: 0.0,
        memory_usage: process::resident_bytes(),
        total_memory,
        available_memory,
        run_time: now.saturating_sub(ctx.started_at),
        start_time: ctx.started_at,
        read_bytes,
        written_bytes,
        messages_size_bytes,
        streams_count: count(catalog.streams.len()),
        topics_count: count(topics),
        partitions_count: count(partitions),
        segments_count: count(segments),
        messages_count,
        clients_count: count(ctx.clients.count()),
        consumer_groups_count: count(
            catalog
                .streams
                .iter()
                .flat_map(|s| s.topics.iter())
                .map(|t| t.groups.len())
                .sum(),
        ),
        hostname: read("/proc/sys/kernel/hostname"),
        os_name: "Linux".into(),
        os_version: kernel.clone(),
        kernel_version: kernel,
        iggy_server_version: concat!("corelog-server ", env!("CARGO_PKG_VERSION")).into(),
        // This server's own version (corelog-server's, not Iggy's), in
        // Iggy's numeric form (major, minor and patch as 3 digits each).
        iggy_server_semver: env!("CARGO_PKG_VERSION")
            .parse::<iggy_common::SemanticVersion>()
            .ok()
            .and_then(|v| v.get_numeric_version().ok()),
        cache_metrics: Vec::new(),
        threads_count: u32::try_from(process::threads()).unwrap_or(u32::MAX),
        free_disk_space,
        total_disk_space,
    })
}

/// DESCRIBE_OPTIONS: the keys a topic takes, with corelog's defaults;
/// streams and users take none (as in Iggy).
pub(super) fn describe_options(ctx: &Context, scope: u8) -> Outcome {
    let entries = match scope {
        OPTIONS_SCOPE_TOPIC => match crate::catalog::options::catalog(ctx.topic_defaults()) {
            Ok(entries) => entries,
            Err(e) => return Outcome::Error(e),
        },
        _ => Vec::new(),
    };
    Outcome::encoded(&DescribeOptionsResponse { entries })
}

/// GET_SNAPSHOT_FILE: the archive of the sections asked for, made on a
/// thread of its own (it lists the data directory).
pub(super) async fn snapshot(ctx: &Context, r: GetSnapshotRequest) -> Result<Outcome, IggyError> {
    let compression = SnapshotCompression::from_code(r.compression)?;
    let sections = r
        .snapshot_types
        .iter()
        .map(|&c| SystemSnapshotType::from_code(c))
        .collect::<Result<Vec<_>, _>>()?;
    let subject = Subject {
        dir: ctx.dir.clone(),
        settings: format!(
            "listen = {}\ndir = {}\nacks after sync (--fsync batch) = {}\nsegment bytes = {}\n{:#?}\n",
            ctx.listen,
            ctx.dir.display(),
            ctx.durable_acks,
            ctx.segment_bytes,
            ctx.limits
        ),
        metrics: format!(
            "engine: {}\nclients: {}",
            ctx.engine.metrics(),
            ctx.counters.snapshot()
        ),
    };
    let (tx, rx) = futures_channel::oneshot::channel();
    std::thread::Builder::new()
        .name("corelog-snapshot".into())
        .spawn(move || {
            let _ = tx.send(crate::commands::snapshot::archive(
                &subject,
                &sections,
                compression,
            ));
        })
        .map_err(|_| IggyError::SnapshotFileCompletionFailed)?;
    match rx
        .await
        .map_err(|_| IggyError::SnapshotFileCompletionFailed)?
    {
        Ok(zip) => Ok(Outcome::Body(zip.into())),
        Err(SnapshotError::BadSections) => Err(IggyError::InvalidCommand),
        Err(SnapshotError::Compression(_)) => Err(IggyError::FeatureUnavailable),
        Err(e) => {
            tracing::warn!("snapshot: {e}");
            Err(IggyError::SnapshotFileCompletionFailed)
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Alone: one healthy leader node, this one (the SDK then stays on this
/// connection). In a cluster: every node, and which one leads.
pub(super) fn cluster_metadata(ctx: &Context) -> Outcome {
    if let Some(c) = &ctx.cluster {
        return Outcome::encoded(&crate::node::cluster::metadata_response(
            &c.config, &c.replica,
        ));
    }
    Outcome::encoded(&ClusterMetadataResponse {
        name: "corelog".into(),
        nodes: vec![ClusterNodeResponse {
            name: "corelog-server".into(),
            ip: ctx.listen.ip().to_string(),
            tcp_port: ctx.listen.port(),
            quic_port: 0,
            http_port: 0,
            websocket_port: 0,
            role: ClusterNodeRole::Leader as u8,
            status: ClusterNodeStatus::Healthy as u8,
        }],
    })
}
