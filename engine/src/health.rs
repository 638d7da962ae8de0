//! The engine's health, for a broker's health check: which shards run,
//! which failed, how full their queues are. Read without a request (the
//! queues' own state), so it answers even when a shard cannot.

/// What a shard is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardState {
    /// Taking requests.
    Running,
    /// It panicked (logged): requests for its partitions get
    /// [`RequestError::ShardFailed`](crate::RequestError::ShardFailed)
    /// until the engine is reopened.
    Failed,
    /// The engine is shutting down.
    Stopped,
}

/// One shard's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardHealth {
    /// The shard.
    pub shard: usize,
    /// What it is doing.
    pub state: ShardState,
    /// Requests waiting in its queue.
    pub queued: usize,
    /// Its queue's capacity (past it, callers wait for room).
    pub capacity: usize,
}

/// The engine's health: each shard's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Every shard, by number.
    pub shards: Vec<ShardHealth>,
}

impl Health {
    /// Whether every shard is running.
    pub fn is_healthy(&self) -> bool {
        self.shards.iter().all(|s| s.state == ShardState::Running)
    }

    /// The shards that failed.
    pub fn failed(&self) -> impl Iterator<Item = usize> + '_ {
        self.shards
            .iter()
            .filter(|s| s.state == ShardState::Failed)
            .map(|s| s.shard)
    }
}
