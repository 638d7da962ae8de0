//! What a shard does with a request for an open partition log.

use super::Shard;
use crate::error::RequestError;
use crate::partitions::Log;
use crate::request::Request;
use std::rc::Rc;
use std::time::Instant;

impl Shard {
    /// Counts a poll's answer in the shard's metrics.
    fn polled(&self, r: &Result<corelog_segment::log::PollReply, RequestError>) {
        self.queue
            .counters
            .poll_done(r.as_ref().ok().map(|p| p.len()));
    }

    pub(super) fn dispatch(self: &Rc<Self>, log: &Log, req: Request) {
        match req {
            Request::Append {
                partition,
                batch,
                stamped,
                reply,
            } => {
                self.queue.counters.append_taken();
                if !stamped && log.commit_mark().is_some() {
                    // Its owner (a Raft group) stamps and orders what it
                    // holds: a batch written beside it would take offsets
                    // the group gives to others.
                    self.queue.counters.append_done(Instant::now(), None);
                    let _ = reply.send(Err(RequestError::Replicated { partition }));
                    return;
                }
                let (started, bytes) = (Instant::now(), batch.len() as u64);
                let fut = if stamped {
                    log.append_stamped(batch)
                } else {
                    log.append(batch)
                };
                let shard = self.clone();
                self.spawn_tracked(async move {
                    let r = fut.await.map_err(|e| RequestError::appending(partition, e));
                    let stored = r.as_ref().ok().map(|_| bytes);
                    shard.queue.counters.append_done(started, stored);
                    let _ = reply.send(r);
                });
            }
            Request::Poll {
                from,
                max_bytes,
                reply,
                ..
            } => {
                let r = log.poll(from, max_bytes).map_err(RequestError::from);
                self.polled(&r);
                let _ = reply.send(r);
            }
            Request::PollWait {
                partition,
                from,
                max_bytes,
                deadline,
                reply,
            } => match log.poll(from, max_bytes) {
                Ok(r) if r.is_empty() && !self.closing.get() && Instant::now() < deadline => {
                    // Nothing yet: wait for the visible end to move (or the
                    // deadline), then route the request again, so it polls
                    // whatever log the partition has then (a cut or a close
                    // replaces it).
                    let changed = log.visible_changed();
                    let shard = self.clone();
                    self.spawn_tracked(async move {
                        let at = monoio::time::Instant::from_std(deadline);
                        let _ = monoio::time::timeout_at(at, changed).await;
                        shard.handle(Request::PollWait {
                            partition,
                            from,
                            max_bytes,
                            deadline,
                            reply,
                        });
                    });
                }
                r => {
                    let r = r.map_err(RequestError::from);
                    self.polled(&r);
                    let _ = reply.send(r);
                }
            },
            Request::PollNext {
                consumer,
                max_bytes,
                reply,
                ..
            } => {
                let (log, shard) = (log.clone(), self.clone());
                self.spawn_tracked(async move {
                    let r = log
                        .poll_next(consumer, max_bytes)
                        .await
                        .map_err(RequestError::from);
                    shard.polled(&r);
                    let _ = reply.send(r);
                });
            }
            Request::StoreOffset {
                consumer,
                offset,
                reply,
                ..
            } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(
                        log.store_offset(consumer, offset)
                            .await
                            .map_err(RequestError::from),
                    );
                });
            }
            Request::LoadOffset {
                consumer, reply, ..
            } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(log.load_offset(consumer).await.map_err(RequestError::from));
                });
            }
            Request::DeleteOffset {
                consumer, reply, ..
            } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(
                        log.delete_offset(consumer)
                            .await
                            .map_err(RequestError::from),
                    );
                });
            }
            Request::DeleteSegments { count, reply, .. } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(
                        log.delete_oldest_segments(count)
                            .await
                            .map_err(RequestError::from),
                    );
                });
            }
            Request::Offloadable { reply, .. } => {
                let stats = log.stats();
                let _ = reply.send(Ok(crate::offloader::Offloadable {
                    sealed: log.sealed_segments(),
                    retention: log.retention(),
                    first_offset: stats.first_offset,
                    bytes: stats.bytes,
                }));
            }
            Request::TrimOffloaded {
                through,
                keep_bytes,
                reply,
                ..
            } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(
                        log.trim_offloaded(through, keep_bytes)
                            .await
                            .map_err(RequestError::from),
                    );
                });
            }
            Request::Flush { reply, .. } => {
                let log = log.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(log.flush().await.map_err(RequestError::from));
                });
            }
            Request::Stats { reply, .. } => {
                let _ = reply.send(Ok(log.stats()));
            }
            Request::SetCommitMark { offset, reply, .. } => {
                let _ = reply.send(log.set_commit_mark(offset).map_err(RequestError::from));
            }
            req @ Request::CutSuffix { .. } => self.cut_suffix(log, req),
            req @ Request::Reopen { .. } => self.reopen(log.partition(), Some(log.clone()), req),
            Request::ReadWritten { offset, reply, .. } => {
                let _ = reply.send(log.written_batch(offset).map_err(RequestError::from));
            }
            Request::Create {
                options: None,
                reply,
                ..
            } => {
                let _ = reply.send(Ok(()));
            }
            Request::Create {
                partition,
                options: Some(options),
                reply,
            } => {
                // Kept for the next open; retention applies at once.
                let (shard, log) = (self.clone(), log.clone());
                self.spawn_tracked(async move {
                    let r = shard.write_options(partition, &options).await;
                    if r.is_ok() {
                        shard.retention.borrow_mut().remove(&partition);
                        log.set_retention(options.retention.unwrap_or(shard.config.retention));
                    }
                    let r =
                        r.map_err(|(path, e)| RequestError::io("write partition options", path, e));
                    let _ = reply.send(r);
                });
            }
            Request::Options { partition, reply } => {
                let shard = self.clone();
                self.spawn_tracked(async move {
                    let _ = reply.send(shard.options_of(partition).await);
                });
            }
            req @ Request::Delete { .. } => {
                let p = log.partition();
                self.delete_partition(p, Some(log.clone()), req);
            }
            #[cfg(feature = "testing")]
            Request::Panic => unreachable!("only requests for a partition's log reach it"),
            Request::Spawn(_)
            | Request::Shutdown
            | Request::List { .. }
            | Request::SetRetention { .. }
            | Request::Retention { .. } => {
                unreachable!("only requests for a partition's log reach it")
            }
        }
    }
}
