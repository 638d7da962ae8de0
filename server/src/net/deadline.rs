//! Running a socket operation until a deadline. Dropping an io_uring
//! operation's future does not stop the operation (this build has no
//! monoio `async-cancel`): a read would stay in the ring, holding the
//! socket open after the connection is dropped. So a timed-out operation
//! is cancelled explicitly and awaited until the ring gives its buffer
//! back; then the socket really closes.

use monoio::io::Canceller;
use std::future::Future;
use std::time::Instant;

/// Runs `op`, built with a handle of `canceller`; at `deadline` cancels
/// it and waits for it to end. Returns its output and whether the
/// deadline passed first.
pub async fn cancel_at<T>(
    deadline: Option<Instant>,
    canceller: Canceller,
    op: impl Future<Output = T>,
) -> (T, bool) {
    let Some(deadline) = deadline else {
        return (op.await, false);
    };
    let mut op = std::pin::pin!(op);
    let sleep = monoio::time::sleep_until(monoio::time::Instant::from_std(deadline));
    monoio::select! {
        out = &mut op => (out, false),
        _ = sleep => {
            let _ = canceller.cancel();
            (op.await, true)
        }
    }
}
