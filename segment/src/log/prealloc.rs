//! Preallocation ahead of the write position, in steps.
//!
//! A segment's file is grown with `fallocate` a step ahead of where appends
//! write, so a busy partition's `fdatasync`s seldom have metadata to update;
//! but only a step, so thousands of partitions do not reserve a segment's
//! worth of disk each. The step starts at `step_min`
//! ([`Preallocation`](super::config::Preallocation)) and doubles
//! when a step was used up within a second (up to `step_max`); it halves
//! when a step lasted more than ten. An idle partition holds at most the
//! unwritten rest of one step; a clean close trims it.
//!
//! A shard's partitions share a budget of preallocated, unwritten bytes
//! (`budget`): a step that would exceed it is not taken (the write then
//! extends the file itself). The budget is counted per thread, which is per
//! shard: no lock, no sharing.

use super::config::Preallocation;
use super::event::Event;
use crate::io::StorageFile;
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

thread_local! {
    /// Preallocated bytes not yet written, over this thread's segments.
    static AHEAD: Cell<u64> = const { Cell::new(0) };
}

/// The preallocated, unwritten bytes of every segment on this thread (the
/// shard): what the budget bounds.
pub fn preallocated_ahead() -> u64 {
    AHEAD.with(Cell::get)
}

/// One segment's preallocation state.
#[derive(Default)]
pub(crate) struct Prealloc {
    /// Where the allocated part of the file ends (asked for; the last step
    /// may still be running).
    end: u64,
    /// How far appends have reserved.
    written: u64,
    /// The next step's size (0: not started).
    step: u64,
    /// When the last step was asked for.
    last: Option<Instant>,
    /// Set when the step in flight finished (a truncation must wait).
    pending: Option<Rc<Event>>,
}

impl Prealloc {
    /// The state of a segment whose file holds `len` bytes (all written).
    pub(crate) fn at(len: u64) -> Prealloc {
        Prealloc {
            end: len,
            written: len,
            step: 0,
            last: None,
            pending: None,
        }
    }

    /// Appends reserved up to `written`; when less than half a step is left
    /// allocated, grows the file to a step past `written` (never past
    /// `limit`, the segment's size).
    pub(crate) fn reserved<F: StorageFile>(
        &mut self,
        written: u64,
        limit: u64,
        config: Option<&Preallocation>,
        file: &F,
        path: &Path,
    ) {
        let consumed = self
            .end
            .min(written)
            .saturating_sub(self.end.min(self.written));
        AHEAD.with(|a| a.set(a.get().saturating_sub(consumed)));
        self.written = written;
        let Some(config) = config.filter(|_| self.end < limit) else {
            return;
        };
        if self.step == 0 {
            self.step = config.step_min.max(1);
        }
        let left = self.end.saturating_sub(written);
        if left > self.step / 2 || self.pending.as_ref().is_some_and(|p| !p.is_set()) {
            return;
        }
        let now = Instant::now();
        match self.last.map(|t| now.duration_since(t)) {
            Some(d) if d < Duration::from_secs(1) => {
                self.step = (self.step * 2).min(config.step_max.max(config.step_min));
            }
            Some(d) if d > Duration::from_secs(10) => {
                self.step = (self.step / 2).max(config.step_min);
            }
            _ => {}
        }
        // Never more than a step ahead of the write position.
        let from = self.end.max(written);
        let target = (written + self.step).min(limit);
        let grow = target.saturating_sub(from);
        if grow == 0 || preallocated_ahead() + grow > config.budget {
            return;
        }
        AHEAD.with(|a| a.set(a.get() + grow));
        self.end = target;
        self.last = Some(now);
        self.pending = Some(allocate(file, target, path));
    }

    /// The segment stops growing (sealed, closed, cut): its unwritten
    /// preallocation leaves the budget. Returns the step in flight, which a
    /// truncation must wait for.
    pub(crate) fn release(&mut self) -> Option<Rc<Event>> {
        let ahead = self.end.saturating_sub(self.written);
        AHEAD.with(|a| a.set(a.get().saturating_sub(ahead)));
        self.end = self.written;
        self.pending.clone()
    }
}

impl Drop for Prealloc {
    fn drop(&mut self) {
        self.release();
    }
}

/// Grows `file` to `len` bytes with fallocate on the ring; the event is set
/// when done (a failure only costs the metadata updates it would save).
fn allocate<F: StorageFile>(file: &F, len: u64, path: &Path) -> Rc<Event> {
    let done = Rc::new(Event::default());
    let (f, d, p) = (file.clone(), done.clone(), path.to_path_buf());
    monoio::spawn(async move {
        if let Err(e) = f.allocate(len).await {
            tracing::warn!("preallocating {}: {e}", p.display());
        }
        d.set();
    });
    done
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::{SimStorage, Storage};

    const MIB: u64 = 1 << 20;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .expect("legacy runtime")
            .block_on(f)
    }

    /// Waits until the step in flight landed.
    async fn settle(p: &Prealloc) {
        if let Some(e) = p.pending.clone() {
            e.wait().await;
        }
    }

    /// The step policy: the first step is `step_min` a step past the
    /// write position; no new step while more than half of one is left or
    /// one is in flight; steps used up within a second double, up to
    /// `step_max`; never past the segment's limit; the budget counts what
    /// is allocated and unwritten, and a release gives it back.
    #[test]
    fn steps_start_small_wait_for_half_a_step_double_when_busy_and_stop_at_the_limit() {
        run(async {
            let disk = SimStorage::new(1, 64 << 20);
            disk.create_dir_all(Path::new("/d")).unwrap();
            let path = Path::new("/d/seg");
            let file = disk.open(path, true).unwrap();
            let config = Preallocation {
                step_min: MIB,
                step_max: 4 * MIB,
                budget: 1 << 30,
            };
            let limit = 12 * MIB;
            let mut p = Prealloc::default();
            assert_eq!(preallocated_ahead(), 0);
            p.reserved(100, limit, Some(&config), &file, path);
            assert_eq!((p.end, p.step), (100 + MIB, MIB), "a step_min past 100");
            assert_eq!(preallocated_ahead(), MIB, "all of it unwritten");
            settle(&p).await;
            assert_eq!(file.len().unwrap(), 100 + MIB, "the file grew to the step");
            // More than half a step left: no new step.
            p.reserved(100 + MIB / 2 - 1, limit, Some(&config), &file, path);
            assert_eq!(p.end, 100 + MIB, "more than half a step left");
            assert_eq!(preallocated_ahead(), MIB / 2 + 1);
            // Half a step left: the next step, doubled (the last one was
            // used up within a second), a step past the write position.
            let w = 100 + MIB / 2;
            p.reserved(w, limit, Some(&config), &file, path);
            assert_eq!((p.step, p.end), (2 * MIB, w + 2 * MIB), "doubled");
            assert_eq!(preallocated_ahead(), 2 * MIB);
            // In flight: no further step, however little is left.
            let end = p.end;
            p.reserved(end - 10, limit, Some(&config), &file, path);
            assert_eq!(p.end, end, "one step in flight at a time");
            settle(&p).await;
            assert_eq!(file.len().unwrap(), end);
            // Doubling stops at step_max.
            let mut w = p.end;
            for _ in 0..3 {
                p.reserved(w, limit, Some(&config), &file, path);
                settle(&p).await;
                w = p.end;
            }
            assert_eq!(p.step, 4 * MIB, "capped at step_max");
            assert_eq!(p.end, limit, "never past the limit");
            assert_eq!(file.len().unwrap(), limit);
            // At the limit: nothing more.
            p.reserved(limit, limit, Some(&config), &file, path);
            assert_eq!(p.end, limit);
            assert_eq!(preallocated_ahead(), 0, "all written");
            // A release gives back what was allocated and not written.
            let mut q = Prealloc::at(0);
            q.reserved(10, limit, Some(&config), &file, path);
            assert_eq!(preallocated_ahead(), MIB);
            settle(&q).await;
            q.release();
            assert_eq!(preallocated_ahead(), 0, "released");
        });
    }

    /// A step that lasted more than ten seconds halves the next (not
    /// below `step_min`); one that lasted between one and ten keeps it.
    #[test]
    fn a_step_that_lasted_past_ten_seconds_halves_and_a_middling_one_stays() {
        run(async {
            let disk = SimStorage::new(3, 64 << 20);
            disk.create_dir_all(Path::new("/d")).unwrap();
            let path = Path::new("/d/seg");
            let file = disk.open(path, true).unwrap();
            let config = Preallocation {
                step_min: MIB,
                step_max: 8 * MIB,
                budget: 1 << 30,
            };
            let limit = 64 * MIB;
            let ago = |secs| Instant::now().checked_sub(Duration::from_secs(secs));
            let mut p = Prealloc::at(0);
            p.step = 4 * MIB;
            p.reserved(0, limit, Some(&config), &file, path);
            assert_eq!(p.end, 4 * MIB, "the first step");
            settle(&p).await;
            // Used up over 11 s: halved.
            p.last = ago(11);
            p.reserved(p.end, limit, Some(&config), &file, path);
            assert_eq!((p.step, p.end), (2 * MIB, 6 * MIB), "halved");
            settle(&p).await;
            // Over 5 s: kept.
            p.last = ago(5);
            p.reserved(p.end, limit, Some(&config), &file, path);
            assert_eq!((p.step, p.end), (2 * MIB, 8 * MIB), "kept");
            settle(&p).await;
            // Halving stops at step_min.
            for _ in 0..3 {
                p.last = ago(11);
                p.reserved(p.end, limit, Some(&config), &file, path);
                settle(&p).await;
            }
            assert_eq!(p.step, MIB, "not below step_min");
            p.release();
            assert_eq!(preallocated_ahead(), 0);
        });
    }

    /// A step that would take the shard's unwritten preallocation past
    /// its budget is not taken.
    #[test]
    fn a_step_past_the_budget_is_not_taken() {
        run(async {
            let disk = SimStorage::new(2, 64 << 20);
            disk.create_dir_all(Path::new("/d")).unwrap();
            let (a, b) = (Path::new("/d/a"), Path::new("/d/b"));
            let (fa, fb) = (disk.open(a, true).unwrap(), disk.open(b, true).unwrap());
            let config = Preallocation {
                step_min: MIB,
                step_max: MIB,
                budget: MIB + MIB / 2,
            };
            let (mut pa, mut pb) = (Prealloc::default(), Prealloc::default());
            pa.reserved(0, 64 * MIB, Some(&config), &fa, a);
            assert_eq!(pa.end, MIB);
            pb.reserved(0, 64 * MIB, Some(&config), &fb, b);
            assert_eq!(pb.end, 0, "a second step would pass the budget");
            settle(&pa).await;
            pa.release();
            pb.reserved(0, 64 * MIB, Some(&config), &fb, b);
            assert_eq!(pb.end, MIB, "taken once the budget allows it");
            settle(&pb).await;
            pb.release();
            assert_eq!(preallocated_ahead(), 0);
        });
    }
}
