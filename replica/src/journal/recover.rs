//! Opening a journal: its files read back, as the recovery table in
//! `mod.rs` says.

use super::{io_err, record, sync_dir, JFile, Journal, JournalError, Recovered};
use bytes::Bytes;
use std::fs::OpenOptions;
use std::path::PathBuf;

impl Journal {
    fn list_files(&self) -> Result<Vec<(u64, PathBuf)>, JournalError> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(io_err("list", &self.dir))? {
            let e = e.map_err(io_err("list", &self.dir))?;
            let name = e.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            if let Ok(first) = stem.parse::<u64>() {
                out.push((first, e.path()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Reads every file, keeps the whole consecutive records, cuts at the
    /// first that is not (see the table above).
    pub(super) fn recover(&mut self) -> Result<Recovered, JournalError> {
        let snap = self.state.snapshot_index;
        let mut out = Recovered::default();
        let listed = self.list_files()?;
        if let Some((n, at, why)) = self.read_files(&listed)? {
            out.cut = Some(why);
            self.cut_files(&listed, n, at, &mut out)?;
        }
        if let Some(first) = self.entries.front() {
            if first.index != snap + 1 {
                return Err(JournalError::Gap {
                    dir: self.dir.clone(),
                    from: snap + 1,
                    to: first.index,
                    snapshot: snap,
                });
            }
        }
        // The commit index is persisted lazily; what the log holds bounds it.
        let last = self.last_index();
        if self.state.hard.commit > last {
            self.state.hard.commit = last;
        }
        out.entries = self.entries.len() as u64;
        Ok(out)
    }

    /// Reads the files in order, keeping their whole consecutive records;
    /// the first that is not says where to cut: file `n`, byte, and why.
    fn read_files(
        &mut self,
        listed: &[(u64, PathBuf)],
    ) -> Result<Option<(usize, u64, String)>, JournalError> {
        let snap = self.state.snapshot_index;
        let mut prev: Option<(u64, u64)> = None; // (index, term)
        for (n, (first, path)) in listed.iter().enumerate() {
            // Compacted whole (its removal, off the loop, had not run or
            // failed): nothing in it counts, not even a gap or damage.
            if listed.get(n + 1).is_some_and(|(next, _)| *next <= snap + 1) {
                let len = std::fs::metadata(path).map_or(0, |m| m.len());
                self.files.push_back(JFile {
                    first_index: *first,
                    path: path.clone(),
                    len,
                });
                continue;
            }
            let bytes = Bytes::from(std::fs::read(path).map_err(io_err("read", path))?);
            let mut at = 0usize;
            while at < bytes.len() {
                let d = match record::decode(&bytes.slice(at..)) {
                    Ok(d) => d,
                    Err(e) => {
                        return Ok(Some((
                            n,
                            at as u64,
                            format!("{}: byte {at}: {e}", path.display()),
                        )))
                    }
                };
                if let Some(why) = self.refused(prev, &d) {
                    return Ok(Some((
                        n,
                        at as u64,
                        format!("{}: byte {at}: {why}", path.display()),
                    )));
                }
                prev = Some((d.entry.index, d.entry.term));
                if d.entry.index > snap {
                    self.retained += d.len as u64;
                    self.positions.push_back((n as u64, at as u64));
                    self.pointers.push_back(d.pointer);
                    self.entries.push_back(d.entry);
                }
                at += d.len;
            }
            self.files.push_back(JFile {
                first_index: *first,
                path: path.clone(),
                len: bytes.len() as u64,
            });
        }
        Ok(None)
    }

    /// Why the whole record `d` does not follow the entry `prev` (index,
    /// term), or the snapshot when it is the first: not the next index, a
    /// term going back, or written after another history.
    fn refused(&self, prev: Option<(u64, u64)>, d: &record::Decoded) -> Option<String> {
        let e = &d.entry;
        let expected = prev.map(|(i, _)| i + 1);
        let term_back = prev.is_some_and(|(_, t)| e.term < t);
        // The term the record says came before it: the record before it,
        // or the snapshot it follows.
        let before = match prev {
            Some((_, t)) => Some(t),
            None if e.index == self.state.snapshot_index + 1 => Some(self.state.snapshot_term),
            None => None,
        };
        if expected.is_some_and(|x| e.index != x) || term_back {
            return Some(format!(
                "entry {} (term {}) after {prev:?}",
                e.index, e.term
            ));
        }
        before.filter(|t| *t != d.prev_term).map(|_| {
            format!(
                "entry {} (term {}) was written after an entry of term {}, not {before:?}: a suffix rewritten after a cut, persisted in part",
                e.index, e.term, d.prev_term
            )
        })
    }

    /// Cuts file `n` at byte `at` (removed, when nothing of it is kept and
    /// it is not the first) and removes every later file.
    fn cut_files(
        &mut self,
        listed: &[(u64, PathBuf)],
        n: usize,
        at: u64,
        out: &mut Recovered,
    ) -> Result<(), JournalError> {
        let (first, path) = &listed[n];
        if at == 0 && n > 0 {
            // Nothing of this file is kept: it goes, so that no file is
            // named by an index it does not start with.
            std::fs::remove_file(path).map_err(io_err("remove", path))?;
            out.removed_files += 1;
        } else {
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_err("open", path))?;
            f.set_len(at).map_err(io_err("truncate", path))?;
            f.sync_all().map_err(io_err("fsync", path))?;
            self.files.push_back(JFile {
                first_index: *first,
                path: path.clone(),
                len: at,
            });
        }
        for (_, later) in &listed[n + 1..] {
            std::fs::remove_file(later).map_err(io_err("remove", later))?;
            out.removed_files += 1;
        }
        sync_dir(&self.dir).map_err(io_err("fsync directory", &self.dir))?;
        tracing::warn!(
            "journal {}: cut at {} ({} later files removed)",
            self.dir.display(),
            out.cut.as_deref().unwrap_or_default(),
            out.removed_files
        );
        Ok(())
    }
}
