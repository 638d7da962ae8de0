//! A journal sync taken off the group's loop: the loop takes a ticket
//! naming the last entry written and a second handle on the file that
//! holds it; another thread runs the `fdatasync`; the loop then records
//! what the ticket made durable, unless entries were cut or replaced in
//! between (a ticket vouches only for the entries it saw).
//!
//! Every record up to the ticket's index lies in the file it names or in
//! an earlier one, and an earlier one was synced when the journal rolled
//! past it (`write_one`); files that came or went are made durable in the
//! directory before the ticket is taken. So one `fdatasync` of the
//! ticket's file makes every entry up to its index durable.

use super::{io_err, sync_dir, Journal, JournalError};
use std::fs::File;
use std::path::PathBuf;

/// One `fdatasync` to run away from the journal's owner
/// ([`Journal::sync_ticket`]), then hand back ([`Journal::synced_by`]).
#[derive(Debug)]
pub struct SyncTicket {
    file: Option<(File, PathBuf)>,
    index: u64,
    cuts: u64,
}

impl SyncTicket {
    /// Whether running it syncs anything: a ticket taken with nothing
    /// written since the one before leaves that one to do it.
    pub fn syncs(&self) -> bool {
        self.file.is_some()
    }

    /// Makes every entry up to the ticket's index durable (with every
    /// ticket before it run first, in order).
    pub fn run(&self) -> Result<(), JournalError> {
        match &self.file {
            Some((file, path)) => {
                #[cfg(feature = "testing")]
                hold::wait(path);
                file.sync_data().map_err(io_err("fsync", path))
            }
            None => Ok(()),
        }
    }
}

impl Journal {
    /// A ticket for making everything written so far durable on another
    /// thread. The directory, when files came or went, is synced here
    /// first (rare: a roll or a cut).
    pub fn sync_ticket(&mut self) -> Result<SyncTicket, JournalError> {
        if self.dir_dirty {
            sync_dir(&self.dir).map_err(io_err("fsync directory", &self.dir))?;
            self.dir_dirty = false;
        }
        // Nothing written since the last ticket: that one's sync covers
        // this one's entries (the persister runs them in order).
        let file = match (
            self.unsynced && self.unticketed,
            self.active.as_ref(),
            self.files.back(),
        ) {
            (true, Some(active), Some(f)) => Some((
                active.try_clone().map_err(io_err("dup", &f.path))?,
                f.path.clone(),
            )),
            _ => None,
        };
        self.unticketed = false;
        Ok(SyncTicket {
            file,
            index: self.last_index(),
            cuts: self.cuts,
        })
    }

    /// Records that `ticket` ran: its entries are durable, unless some of
    /// them were cut or replaced since it was taken.
    pub fn synced_by(&mut self, ticket: &SyncTicket) {
        if ticket.cuts == self.cuts {
            self.synced_index = self.synced_index.max(ticket.index.min(self.last_index()));
        }
    }
}

/// For tests: syncs of the journals under a directory held back (a slow
/// or stuck disk), to show what waits for them.
#[cfg(feature = "testing")]
pub mod hold {
    use std::path::{Path, PathBuf};
    use std::sync::{Condvar, Mutex};

    static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    static RELEASED: Condvar = Condvar::new();

    /// Syncs of journal files under `dir` wait until the guard is dropped.
    #[must_use = "the syncs are released when this is dropped"]
    pub fn hold_syncs(dir: &Path) -> Held {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.push(dir.to_owned());
        Held(dir.to_owned())
    }

    /// Holds the syncs under a directory while it lives.
    #[derive(Debug)]
    pub struct Held(PathBuf);

    impl Drop for Held {
        fn drop(&mut self) {
            let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = held.iter().position(|d| *d == self.0) {
                held.remove(i);
            }
            RELEASED.notify_all();
        }
    }

    pub(super) fn wait(path: &Path) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        while held.iter().any(|d| path.starts_with(d)) {
            held = RELEASED.wait(held).unwrap_or_else(|e| e.into_inner());
        }
    }
}
