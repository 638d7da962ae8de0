//! Whether the calling thread is a shard. Its own module so that the
//! queue (which refuses to block a shard) need not know the shard.

use std::cell::Cell;

thread_local! {
    static ON_SHARD: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running a shard.
pub(crate) fn on_shard_thread() -> bool {
    ON_SHARD.with(Cell::get)
}

/// Marks the calling thread as a shard's (or no longer one).
pub(crate) fn set_on_shard_thread(on: bool) {
    ON_SHARD.with(|c| c.set(on));
}
