//! Stopping the engine: [`Engine::shutdown`], with or without a time
//! limit, and what happens to shards that outlive it.

use super::Engine;
use crate::error::ShutdownError;
use crate::queue::ShardQueue;
use crate::request::Request;
use crate::shard;
use crate::thread;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

impl Engine {
    /// Stops taking requests, lets every shard finish the requests it has
    /// taken, flushes and closes every partition, stops the threads and
    /// releases the directory lock. Requests still queued get
    /// [`RequestError::ShuttingDown`](crate::RequestError::ShuttingDown). Refuses to run on a shard thread
    /// ([`ShutdownError::WouldBlockShard`]). Fails with
    /// [`ShutdownError::CloseFailed`] when a partition's final flush or close
    /// failed (the threads are stopped and the lock released all the same).
    pub fn shutdown(mut self) -> Result<(), ShutdownError> {
        self.stop(None)
    }

    /// [`Engine::shutdown`], waiting at most `timeout` for the shards to
    /// stop. When one has not (a request or task of its own still
    /// running), the answer is [`ShutdownError::TimedOut`] naming
    /// it: the shards finish in the background, and the data directory
    /// stays locked until they have, so nothing else opens it while they
    /// may still write.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Result<(), ShutdownError> {
        self.stop(Some(timeout))
    }

    pub(super) fn stop(&mut self, timeout: Option<Duration>) -> Result<(), ShutdownError> {
        if self.threads.is_empty() {
            self.lock = None;
            return Ok(());
        }
        if thread::on_shard_thread() {
            return Err(ShutdownError::WouldBlockShard);
        }
        // The offloader asks the shards for work: it stops first, its
        // upload in progress cut short by the tier's stop.
        if let Some(t) = &self.handle.shared.tier {
            t.stop();
        }
        if let Some(mut o) = self.offloader.take() {
            o.stop();
        }
        let started = Instant::now();
        self.handle.shared.closing.store(true, Ordering::SeqCst);
        let within = |t: &JoinHandle<_>, q: &ShardQueue| {
            !t.is_finished() && !q.is_closed() && timeout.is_none_or(|d| started.elapsed() < d)
        };
        let mut told = Vec::with_capacity(self.threads.len());
        for (q, t) in self.handle.shared.queues.iter().zip(&self.threads) {
            let mut req = Request::Shutdown;
            told.push(loop {
                match q.try_push(req) {
                    Ok(()) => break true,
                    Err(r) if within(t, q) => {
                        req = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(_) => break false,
                }
            });
        }
        if let Some(d) = timeout {
            while self.threads.iter().any(|t| !t.is_finished()) && started.elapsed() < d {
                std::thread::sleep(Duration::from_millis(1));
            }
            let running: Vec<usize> = (0..self.threads.len())
                .filter(|&i| !self.threads[i].is_finished())
                .collect();
            if !running.is_empty() {
                self.stop_in_background(told);
                return Err(ShutdownError::TimedOut {
                    running,
                    waited: started.elapsed(),
                });
            }
        }
        let failures = join_shards(std::mem::take(&mut self.threads));
        for q in &self.handle.shared.queues {
            q.close();
        }
        self.lock = None;
        match failures.into_iter().next() {
            None => Ok(()),
            Some((partition, error)) => Err(ShutdownError::CloseFailed { partition, error }),
        }
    }

    /// The shards that outlived a shutdown's timeout are stopped on a
    /// thread of their own: it hands each the shutdown request it could not
    /// take yet (its queue was full), joins them, then closes the queues
    /// and releases the directory lock.
    fn stop_in_background(&mut self, told: Vec<bool>) {
        let threads = std::mem::take(&mut self.threads);
        // Shared with the thread, so that the lock outlives a thread that
        // could not start.
        let lock = Arc::new(Mutex::new(self.lock.take()));
        let (shared, held) = (self.handle.shared.clone(), lock.clone());
        let reaper = std::thread::Builder::new()
            .name("corelog-stop".into())
            .spawn(move || {
                let untold = shared.queues.iter().zip(&threads).zip(&told);
                for ((q, t), _) in untold.filter(|(_, told)| !**told) {
                    let mut req = Request::Shutdown;
                    while !t.is_finished() && !q.is_closed() {
                        match q.try_push(req) {
                            Ok(()) => break,
                            Err(r) => req = r,
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                for (partition, error) in join_shards(threads) {
                    tracing::error!("shutdown: closing partition {partition} failed: {error}");
                }
                for q in &shared.queues {
                    q.close();
                }
                drop(held.lock().ok().and_then(|mut l| l.take()));
            });
        if let Err(e) = reaper {
            // No thread to wait on them: keep the lock for the process's
            // life rather than release it under running shards.
            tracing::error!("shutdown: cannot start the thread that waits for the shards: {e}");
            std::mem::forget(lock);
        }
    }
}

/// Joins the shard threads: the partitions whose final close failed.
fn join_shards(threads: Vec<JoinHandle<shard::CloseFailures>>) -> shard::CloseFailures {
    let mut failures = Vec::new();
    for (i, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(f) => failures.extend(f),
            Err(_) => tracing::error!("shard {i} panicked while stopping"),
        }
    }
    failures
}
