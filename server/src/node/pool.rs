//! Blocking work on a fixed pool of threads, off the shards: password
//! checks (argon2 is slow by design, tens of milliseconds of a core each)
//! and catalog writes (fsyncs). A flood waits its turn here instead of
//! starting threads or blocking a shard's event loop.
//!
//! Memory: each queued job is one boxed closure. A connection has at most
//! one request in flight, so the queue never holds more jobs than there
//! are connections (`--max-connections`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed number of threads taking checks from one queue, in order.
#[derive(Debug)]
pub struct BlockingPool {
    queue: Option<mpsc::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
    waiting: Arc<AtomicUsize>,
}

impl BlockingPool {
    /// Starts `threads` (at least one) threads named `name-N`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<BlockingPool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let waiting = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let (rx, waiting) = (rx.clone(), waiting.clone());
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || loop {
                    let job = {
                        let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
                        rx.recv()
                    };
                    let Ok(job) = job else { return };
                    waiting.fetch_sub(1, Ordering::Relaxed);
                    job();
                })?;
            handles.push(handle);
        }
        Ok(BlockingPool {
            queue: Some(tx),
            threads: handles,
            waiting,
        })
    }

    #[cfg(test)]
    /// Threads in the pool.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    #[cfg(test)]
    /// Jobs queued and not yet started.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Runs `job` on the pool once a thread is free; `None` if the pool
    /// is shutting down.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = futures_channel::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(job());
        });
        self.waiting.fetch_add(1, Ordering::Relaxed);
        if self.queue.as_ref()?.send(job).is_err() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        rx.await.ok()
    }
}

impl Drop for BlockingPool {
    fn drop(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn never_runs_more_jobs_at_once_than_its_threads() {
        let pool = Arc::new(BlockingPool::new(2, "test").expect("pool"));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let checks: Vec<_> = (0..16)
            .map(|i| {
                let (pool, running, peak) = (pool.clone(), running.clone(), peak.clone());
                std::thread::spawn(move || {
                    pollster::block_on(pool.run(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(10));
                        running.fetch_sub(1, Ordering::SeqCst);
                        i
                    }))
                })
            })
            .collect();
        let mut got: Vec<_> = checks
            .into_iter()
            .map(|c| c.join().expect("join").expect("ran"))
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..16).collect::<Vec<_>>());
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(pool.threads(), 2);
        assert_eq!(pool.waiting(), 0);
    }
}
