//! raft-rs logs through `slog`; this drain hands its records to `tracing`
//! (raft-rs's chatter at debug and trace, its warnings and errors as such).

/// Forwards slog records to tracing, naming the group.
#[derive(Debug, Clone, Copy)]
pub struct TracingDrain {
    /// The group the logger belongs to.
    pub group: u32,
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        _values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        let g = self.group;
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", "group {g}: {}", record.msg())
            }
            slog::Level::Warning => tracing::warn!(target: "raft", "group {g}: {}", record.msg()),
            slog::Level::Info => tracing::debug!(target: "raft", "group {g}: {}", record.msg()),
            _ => tracing::trace!(target: "raft", "group {g}: {}", record.msg()),
        }
        Ok(())
    }
}
