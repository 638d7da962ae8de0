//! An offload pass for one partition ([`Tier::offload`]): the leader (a
//! single node always) copies and commits, and hands each new end to its
//! cluster to replicate; a follower trims below the end its group
//! replicated, or, where the cluster replicates none, below the store's
//! manifest once its leader has committed in the group's current term.

use crate::error::TierError;
use crate::leadership::{role, Role};
use crate::manifest::Manifest;
use crate::tier::{OffloadPass, Tier};
use crate::trust::Agreement;
use crate::upload::{clean_strays, commit, expire, load_manifest, manifest_terms, upload_segment};
use corelog_segment::log::{Retention, SealedSegment};
use std::sync::atomic::Ordering;

/// A leader cleans its partition's strays again after this many passes.
pub const CLEAN_EVERY_PASSES: u32 = 64;

impl Tier {
    /// One pass for a partition. As its leader: the store's retention
    /// applied, then the sealed segments it does not hold copied oldest
    /// first, the manifest committed after each under this node's term;
    /// stops at the first failure (later segments wait, so the store never
    /// skips one). As a follower: the manifest in force read, and local
    /// copies may go below it only when it was written in the group's
    /// current term. `local` is the log's first offset and bytes.
    pub fn offload(
        &self,
        partition: u64,
        sealed: &[SealedSegment],
        retention: &Retention,
        local: (u64, u64),
        now_micros: u64,
    ) -> Result<OffloadPass, TierError> {
        let _one_writer = self.uploading.lock().unwrap_or_else(|p| p.into_inner());
        match role(self.config.leadership.as_deref(), partition) {
            Role::Leads(term) => self.lead(partition, term, sealed, retention, local, now_micros),
            // A follower with nothing past its local limit has nothing to
            // trim: it asks the store nothing.
            Role::Follows(Some(_)) if local.1 <= self.config.local_retention_bytes => {
                Ok(OffloadPass::default())
            }
            Role::Follows(Some(term)) => match self.replicated_end(partition) {
                Some(end) => Ok(OffloadPass {
                    offloaded_through: end,
                    ..OffloadPass::default()
                }),
                None => self.follow(partition, term),
            },
            Role::Follows(None) => Ok(OffloadPass::default()),
        }
    }

    fn still_leads(&self, partition: u64, term: u64) -> bool {
        role(self.config.leadership.as_deref(), partition) == Role::Leads(term)
    }

    fn lead(
        &self,
        partition: u64,
        term: u64,
        sealed: &[SealedSegment],
        retention: &Retention,
        local: (u64, u64),
        now_micros: u64,
    ) -> Result<OffloadPass, TierError> {
        let store = self.config.store.as_ref();
        let cached = self.cached(partition).filter(|m| m.term == term);
        let first_look = cached.is_none();
        let mut m = match cached {
            Some(m) => m,
            None => load_manifest(store, partition)?,
        };
        if m.term > term {
            // A later leader has committed: this node is behind.
            self.publish(&m);
            return Ok(OffloadPass::default());
        }
        m.term = term;
        let single = self.config.leadership.is_none();
        if single && !self.is_trusted(partition) {
            if self.agreement(partition, &m, sealed)? == Agreement::Undecided {
                return Ok(OffloadPass::default());
            }
            self.trust(partition);
        }
        let may = || self.still_leads(partition, term);
        if first_look && single {
            // Nobody else writes: what the manifest does not name is stray.
            self.clean(&m, &may)?;
        }
        let expired = expire(store, &may, &mut m, retention, local.0, local.1, now_micros)?;
        self.counters
            .expired_segments
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        self.publish(&m);
        let waiting: Vec<&SealedSegment> = sealed
            .iter()
            .filter(|s| s.base_offset >= m.end_offset() && !m.holds(s.base_offset))
            .collect();
        let mut pass = OffloadPass::default();
        let mut failed = None;
        for s in &waiting {
            let done = upload_segment(store, partition, s, &self.stopping).and_then(|r| {
                let mut next = m.clone();
                next.segments.push(r);
                commit(store, &mut next, &may)?;
                Ok(next)
            });
            match done {
                Ok(next) => {
                    m = next;
                    self.publish(&m);
                    pass.uploaded += 1;
                    self.counters
                        .uploaded_segments
                        .fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .uploaded_bytes
                        .fetch_add(s.len, Ordering::Relaxed);
                }
                Err(e) => {
                    self.counters.upload_errors.fetch_add(1, Ordering::Relaxed);
                    failed = Some(e);
                    break;
                }
            }
        }
        if !single && self.due_for_cleaning(partition, term) {
            // Once this term's manifest is in force, what it does not name
            // and older terms' manifests go; again every
            // `CLEAN_EVERY_PASSES`, for what a deposed leader wrote late.
            // Only while this term's manifest is the one in force and this
            // node still leads: a commit that landed after its leader was
            // deposed must not clean by a manifest its successor's hides.
            let in_force = manifest_terms(store, partition)?.into_iter().max();
            if in_force == Some(term) && may() {
                self.clean(&m, &may)?;
            }
        }
        pass.backlog = waiting
            .iter()
            .skip(pass.uploaded)
            .fold((0, 0), |(n, b), s| (n + 1, b + s.len));
        pass.offloaded_through = m.end_offset();
        self.announce(partition, term, pass.offloaded_through);
        match failed {
            Some(e) if pass.uploaded == 0 => Err(e),
            Some(e) => {
                tracing::warn!("tier: partition {partition}: {e}");
                Ok(pass)
            }
            None => Ok(pass),
        }
    }

    fn follow(&self, partition: u64, term: u64) -> Result<OffloadPass, TierError> {
        let m = load_manifest(self.config.store.as_ref(), partition)?;
        self.publish(&m);
        Ok(OffloadPass {
            // Only a manifest of the current term is known to be the
            // leader's last word.
            offloaded_through: if m.term == term { m.end_offset() } else { 0 },
            ..OffloadPass::default()
        })
    }

    /// Hands the end of this term's manifest to the cluster to replicate,
    /// once per term and again whenever it grew (a new leader's first pass
    /// repeats its predecessor's end, for a follower that missed it).
    fn announce(&self, partition: u64, term: u64, end: u64) {
        let Some(l) = self.config.leadership.as_deref() else {
            return;
        };
        let mut announced = self.announced.lock().unwrap_or_else(|p| p.into_inner());
        let last = announced.get(&partition).copied();
        if end > 0 && last.is_none_or(|(t, e)| t != term || e < end) {
            announced.insert(partition, (term, end));
            l.committed(partition, end);
        }
    }

    /// On a follower: the end its group replicated, when the cluster
    /// replicates commits. A manifest held for reads that ends below it is
    /// stale (the leader committed since): it is dropped, and the next
    /// poll below the local start loads the store's.
    fn replicated_end(&self, partition: u64) -> Option<u64> {
        let end = self.config.leadership.as_deref()?.offloaded(partition)?;
        let mut manifests = self.manifests.lock().unwrap_or_else(|p| p.into_inner());
        if manifests
            .get(&partition)
            .is_some_and(|m| m.end_offset() < end)
        {
            manifests.remove(&partition);
        }
        Some(end)
    }

    fn is_trusted(&self, partition: u64) -> bool {
        let trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
        trusted.contains(&partition)
    }

    fn trust(&self, partition: u64) {
        let mut trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
        trusted.insert(partition);
    }

    fn cached(&self, partition: u64) -> Option<Manifest> {
        let manifests = self.manifests.lock().unwrap_or_else(|p| p.into_inner());
        manifests.get(&partition).map(|m| (**m).clone())
    }

    /// Whether a leader of `term` should clean the partition now: never
    /// yet in this term, or `CLEAN_EVERY_PASSES` passes since it last did.
    fn due_for_cleaning(&self, partition: u64, term: u64) -> bool {
        let mut cleaned = self.cleaned.lock().unwrap_or_else(|p| p.into_inner());
        match cleaned.get_mut(&partition) {
            Some((t, passes)) if *t == term => {
                *passes += 1;
                *passes >= CLEAN_EVERY_PASSES
            }
            _ => true,
        }
    }

    /// Deletes the partition's objects `m` does not name, and the manifests
    /// of terms before its own.
    fn clean(&self, m: &Manifest, may: &dyn Fn() -> bool) -> Result<(), TierError> {
        let store = self.config.store.as_ref();
        let mut strays = clean_strays(store, m, may)?;
        for t in manifest_terms(store, m.partition)? {
            if t < m.term {
                let key = Manifest::key(m.partition, t);
                store.delete(&key)?;
                strays.push(key);
            }
        }
        self.counters
            .strays_deleted
            .fetch_add(strays.len() as u64, Ordering::Relaxed);
        for k in strays {
            tracing::info!(
                "tier: deleted {}, which no manifest in force names",
                store.object_name(&k)
            );
        }
        self.cleaned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(m.partition, (m.term, 0));
        Ok(())
    }
}
