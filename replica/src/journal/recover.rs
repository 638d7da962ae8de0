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
        let mut cut_at: Option<(usize, u64)> = None;
        let mut prev: Option<(u64, u64)> = None; // (index, term)
        'files: for (n, (first, path)) in listed.iter().enumerate() {
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
                let why = match record::decode(&bytes.slice(at..)) {
                    Err(e) => Some(format!("{}: byte {at}: {e}", path.display())),
                    Ok(record::Decoded {
                        entry: e,
                        prev_term,
                        len: used,
                        pointer,
                        ..
                    }) => {
                        let expected = prev.map(|(i, _)| i + 1);
                        let term_back = prev.is_some_and(|(_, t)| e.term < t);
                        // The term the record says came before it: the
                        // record before it, or the snapshot it follows.
                        let before = match prev {
                            Some((_, t)) => Some(t),
                            None if e.index == snap + 1 => Some(self.state.snapshot_term),
                            None => None,
                        };
                        let other_history = before.is_some_and(|t| t != prev_term);
                        if expected.is_some_and(|x| e.index != x) || term_back {
                            Some(format!(
                                "{}: byte {at}: entry {} (term {}) after {:?}",
                                path.display(),
                                e.index,
                                e.term,
                                prev
                            ))
                        } else if other_history {
                            Some(format!(
                                "{}: byte {at}: entry {} (term {}) was written after an entry of term {prev_term}, not {:?}: a suffix rewritten after a cut, persisted in part",
                                path.display(),
                                e.index,
                                e.term,
                                before
                            ))
                        } else {
                            prev = Some((e.index, e.term));
                            if e.index > snap {
                                self.retained += used as u64;
                                self.positions.push_back((n as u64, at as u64));
                                self.pointers.push_back(pointer);
                                self.entries.push_back(e);
                            }
                            at += used;
                            None
                        }
                    }
                };
                if let Some(why) = why {
                    out.cut = Some(why);
                    cut_at = Some((n, at as u64));
                    break 'files;
                }
            }
            self.files.push_back(JFile {
                first_index: *first,
                path: path.clone(),
                len: bytes.len() as u64,
            });
        }
        if let Some((n, at)) = cut_at {
            let (first, path) = &listed[n];
            if at == 0 && n > 0 {
                // Nothing of this file is kept: it goes, so that no file
                // is named by an index it does not start with.
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
}
