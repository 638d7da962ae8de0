//! The journal: raft-rs's own storage tests (`raft::storage::test`, written
//! for its `MemStorage`) run against corelog's adapter, and the journal's
//! recovery table, one test per row, on real files.
#![allow(clippy::field_reassign_with_default)]

use bytes::Bytes;
use corelog_replica::journal::storage::JournalStorage;
use corelog_replica::journal::{record, Journal, JournalError};
use raft::eraftpb::{ConfState, Entry, Snapshot};
use raft::{Error as RaftError, GetEntriesContext, Storage, StorageError};
use std::path::Path;

fn entry(index: u64, term: u64) -> Entry {
    let mut e = Entry::default();
    e.index = index;
    e.term = term;
    e
}

fn conf() -> ConfState {
    ConfState::from((vec![1, 2, 3], vec![]))
}

fn snapshot(index: u64, term: u64) -> Snapshot {
    let mut s = Snapshot::default();
    s.mut_metadata().index = index;
    s.mut_metadata().term = term;
    s.mut_metadata().set_conf_state(conf());
    s
}

/// raft-rs's fixture, `entries = [3/3, 4/4, 5/5]`: here a journal whose
/// snapshot is entry 2 (term 2), followed by 3, 4, 5 (the trait's contract:
/// the entry before `first_index` keeps its term).
fn fixture(dir: &Path, last: u64) -> JournalStorage {
    let (mut j, _) = Journal::open(dir, &conf()).expect("open");
    j.apply_snapshot(&snapshot(2, 2)).expect("snapshot");
    let ents: Vec<Entry> = (3..=last).map(|i| entry(i, i)).collect();
    j.append(&ents).expect("append");
    j.sync().expect("sync");
    JournalStorage::new(j)
}

#[test]
fn storage_term() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = fixture(dir.path(), 5);
    assert_eq!(s.term(1), Err(RaftError::Store(StorageError::Compacted)));
    assert_eq!(s.term(2), Ok(2));
    assert_eq!(s.term(3), Ok(3));
    assert_eq!(s.term(4), Ok(4));
    assert_eq!(s.term(5), Ok(5));
    assert_eq!(s.term(6), Err(RaftError::Store(StorageError::Unavailable)));
}

#[test]
fn storage_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = fixture(dir.path(), 6);
    let ctx = || GetEntriesContext::empty(false);
    let size = |i: u64| record::len(&entry(i, i));
    assert_eq!(
        s.entries(2, 6, u64::MAX, ctx()),
        Err(RaftError::Store(StorageError::Compacted))
    );
    assert_eq!(s.entries(3, 4, u64::MAX, ctx()), Ok(vec![entry(3, 3)]));
    assert_eq!(
        s.entries(4, 6, u64::MAX, ctx()),
        Ok(vec![entry(4, 4), entry(5, 5)])
    );
    assert_eq!(
        s.entries(4, 7, u64::MAX, ctx()),
        Ok(vec![entry(4, 4), entry(5, 5), entry(6, 6)])
    );
    // Even with a max size of zero the first entry is returned.
    assert_eq!(s.entries(4, 7, 0, ctx()), Ok(vec![entry(4, 4)]));
    let two = size(4) + size(5);
    assert_eq!(
        s.entries(4, 7, two, ctx()),
        Ok(vec![entry(4, 4), entry(5, 5)])
    );
    assert_eq!(
        s.entries(4, 7, two + size(6) - 1, ctx()),
        Ok(vec![entry(4, 4), entry(5, 5)])
    );
    assert_eq!(
        s.entries(4, 7, two + size(6), ctx()),
        Ok(vec![entry(4, 4), entry(5, 5), entry(6, 6)])
    );
    assert_eq!(
        s.entries(4, 8, u64::MAX, ctx()),
        Err(RaftError::Store(StorageError::Unavailable))
    );
}

#[test]
fn storage_last_and_first_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = fixture(dir.path(), 5);
    assert_eq!(s.last_index(), Ok(5));
    assert_eq!(s.first_index(), Ok(3));
    s.wl().append(&[entry(6, 5)]).expect("append");
    assert_eq!(s.last_index(), Ok(6));
    s.wl().compact(3, Bytes::new()).expect("compact");
    assert_eq!(s.first_index(), Ok(4));
}

#[test]
fn storage_compact() {
    // (compact through, first index, its term, entries left)
    for (through, first, term, left) in [(2, 3, 3, 3), (3, 4, 4, 2), (4, 5, 5, 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = fixture(dir.path(), 5);
        s.wl().compact(through, Bytes::new()).expect("compact");
        assert_eq!(s.first_index(), Ok(first));
        let got = s
            .entries(first, first + 1, 1, GetEntriesContext::empty(false))
            .expect("entries");
        assert_eq!(got[0].term, term);
        let last = s.last_index().expect("last");
        let n = s
            .entries(first, last + 1, u64::MAX, GetEntriesContext::empty(false))
            .expect("entries")
            .len();
        assert_eq!(n, left);
        // And the compaction holds across a reopen.
        drop(s);
        let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
        assert_eq!(j.first_index(), first);
        assert_eq!(j.last_index(), 5);
    }
}

#[test]
fn storage_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = fixture(dir.path(), 5);
    s.wl()
        .compact(4, Bytes::from_static(b"ends"))
        .expect("compact");
    let snap = s.snapshot(0, 2).expect("snapshot");
    assert_eq!(snap.get_metadata().index, 4);
    assert_eq!(snap.get_metadata().term, 4);
    assert_eq!(snap.get_metadata().get_conf_state(), &conf());
    assert_eq!(&snap.data[..], b"ends");
    assert_eq!(
        s.snapshot(5, 2),
        Err(RaftError::Store(
            StorageError::SnapshotTemporarilyUnavailable
        ))
    );
}

#[test]
fn storage_append() {
    let cases: Vec<(Vec<Entry>, Option<Vec<Entry>>)> = vec![
        (
            vec![entry(3, 3), entry(4, 4), entry(5, 5)],
            Some(vec![entry(3, 3), entry(4, 4), entry(5, 5)]),
        ),
        (
            vec![entry(3, 3), entry(4, 6), entry(5, 6)],
            Some(vec![entry(3, 3), entry(4, 6), entry(5, 6)]),
        ),
        (
            vec![entry(3, 3), entry(4, 4), entry(5, 5), entry(6, 5)],
            Some(vec![entry(3, 3), entry(4, 4), entry(5, 5), entry(6, 5)]),
        ),
        // Overwriting compacted entries is refused.
        (vec![entry(2, 3), entry(3, 3), entry(4, 5)], None),
        // A conflicting suffix is cut, then the entries appended.
        (vec![entry(4, 5)], Some(vec![entry(3, 3), entry(4, 5)])),
        (
            vec![entry(6, 6)],
            Some(vec![entry(3, 3), entry(4, 4), entry(5, 5), entry(6, 6)]),
        ),
    ];
    for (i, (ents, want)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = fixture(dir.path(), 5);
        let res = s.wl().append(&ents);
        match want {
            Some(want) => {
                res.unwrap_or_else(|e| panic!("#{i}: {e}"));
                s.wl().sync().expect("sync");
                let last = s.last_index().expect("last");
                let got = s
                    .entries(3, last + 1, u64::MAX, GetEntriesContext::empty(false))
                    .expect("entries");
                assert_eq!(got, want, "#{i}");
                // The same after a reopen: the cut is on disk.
                drop(s);
                let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
                assert_eq!(rec.cut, None, "#{i}");
                let s = JournalStorage::new(j);
                let got = s
                    .entries(3, last + 1, u64::MAX, GetEntriesContext::empty(false))
                    .expect("entries");
                assert_eq!(got, want, "#{i} after reopen");
            }
            None => assert!(
                matches!(res, Err(JournalError::Discontinuous { .. })),
                "#{i}: {res:?}"
            ),
        }
    }
}

#[test]
fn storage_apply_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    j.apply_snapshot(&snapshot(4, 4)).expect("applies");
    assert!(matches!(
        j.apply_snapshot(&snapshot(3, 3)),
        Err(JournalError::SnapshotOutOfDate {
            offered: 3,
            held: 4
        })
    ));
    assert_eq!(j.first_index(), 5);
}

// The recovery table (journal/mod.rs), one test per row.

fn data_entry(index: u64, term: u64, data: &[u8]) -> Entry {
    let mut e = entry(index, term);
    e.data = Bytes::copy_from_slice(data);
    e
}

/// `e`'s record as written after entries of term 1 (the tests' first
/// term; nothing before entry 1).
fn encoded(e: &Entry) -> Vec<u8> {
    encoded_after(e, u64::from(e.index > 1))
}

fn encoded_after(e: &Entry, prev_term: u64) -> Vec<u8> {
    record::encode_parts(e, prev_term, record::Kind::Plain)
        .slices()
        .concat()
}

fn only_file(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs.remove(0)
}

fn five(dir: &Path) {
    let (mut j, _) = Journal::open(dir, &conf()).expect("open");
    let ents: Vec<Entry> = (1..=5).map(|i| data_entry(i, 1, b"payload")).collect();
    j.append(&ents).expect("append");
    j.sync().expect("sync");
}

#[test]
fn recovery_keeps_whole_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((rec.entries, rec.cut, j.last_index()), (5, None, 5));
    assert_eq!(&j.entry(3).expect("3").data[..], b"payload");
}

#[test]
fn recovery_cuts_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let f = only_file(dir.path());
    let len = std::fs::metadata(&f).expect("meta").len();
    let cut = len - 3;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open");
    file.set_len(cut).expect("tear");
    let (mut j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 4);
    assert!(
        rec.cut.as_deref().is_some_and(|c| c.contains("cut short")),
        "{rec:?}"
    );
    // The file is cut at the last whole record, and appends continue.
    assert!(std::fs::metadata(&f).expect("meta").len() < cut);
    j.append(&[data_entry(5, 2, b"new")]).expect("append");
    j.sync().expect("sync");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.cut), (5, None));
    assert_eq!(&j.entry(5).expect("5").data[..], b"new");
}

#[test]
fn recovery_cuts_at_a_damaged_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let f = only_file(dir.path());
    let mut bytes = std::fs::read(&f).expect("read");
    let one = encoded(&data_entry(1, 1, b"payload")).len();
    bytes[2 * one + record::PREFIX_LEN + record::BODY_FIXED_LEN + 3] ^= 0x10; // entry 3's data
    std::fs::write(&f, &bytes).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 2);
    assert!(
        rec.cut.as_deref().is_some_and(|c| c.contains("checksum")),
        "{rec:?}"
    );
}

#[test]
fn recovery_cuts_a_suffix_whose_truncate_a_crash_undid() {
    // A conflict cut entries 3..=5 (term 1) and wrote a shorter entry 3 of
    // term 2; a power cut kept the new record but not the truncate, so the
    // old entries 4 and 5 follow it. Their term goes back: they are cut.
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let f = only_file(dir.path());
    let mut bytes = std::fs::read(&f).expect("read");
    let one = encoded(&data_entry(1, 1, b"payload")).len();
    let new3 = encoded_after(&data_entry(3, 2, b"payload"), 1);
    bytes[2 * one..3 * one].copy_from_slice(&new3);
    std::fs::write(&f, &bytes).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 3);
    assert_eq!(j.entry(3).expect("3").term, 2);
    assert!(
        rec.cut.as_deref().is_some_and(|c| c.contains("entry 4")),
        "{rec:?}"
    );
}

#[test]
fn recovery_cuts_a_record_written_after_another_history() {
    // A conflict cut entries 3..=5 (term 1) and wrote 3, 4 and 5 of term 2
    // without a sync; a power cut kept the new entry 5's page but not those
    // of the new 3 and 4, so old 3 and 4 precede it. Each record is whole,
    // indexes run on and terms rise, but that log never existed: entry 5
    // was written after an entry 4 of term 2. Cut there.
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let f = only_file(dir.path());
    let mut bytes = std::fs::read(&f).expect("read");
    let one = encoded(&data_entry(1, 1, b"payload")).len();
    let new5 = encoded_after(&data_entry(5, 2, b"payload"), 2);
    bytes[4 * one..5 * one].copy_from_slice(&new5);
    std::fs::write(&f, &bytes).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 4);
    assert_eq!(j.entry(4).expect("4").term, 1);
    assert!(
        rec.cut.as_deref().is_some_and(
            |c| c.contains("entry 5") && c.contains("written after an entry of term 2")
        ),
        "{rec:?}"
    );
}

#[test]
fn recovery_removes_files_after_a_cut_and_refuses_a_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    // A later file whose entries do not continue the first: removed.
    let later = dir.path().join(format!("{:020}.log", 9));
    std::fs::write(&later, encoded(&data_entry(9, 1, b"x"))).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.removed_files), (5, 1));
    assert!(!later.exists());
    drop(j);
    // Entries missing between the snapshot and the first record: refused.
    let f = only_file(dir.path());
    std::fs::remove_file(&f).expect("remove");
    std::fs::write(
        dir.path().join(format!("{:020}.log", 7)),
        encoded(&data_entry(7, 1, b"x")),
    )
    .expect("write");
    assert!(matches!(
        Journal::open(dir.path(), &conf()),
        Err(JournalError::Gap { from: 1, to: 7, .. })
    ));
}

#[test]
fn recovery_reads_past_compacted_files_left_behind() {
    // Entries 1..=12, compacted through 10: the state file says so.
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
        let ents: Vec<Entry> = (1..=12).map(|i| data_entry(i, 1, b"payload")).collect();
        j.append(&ents).expect("append");
        j.compact(10, Bytes::new()).expect("compact");
    }
    // As if the files had rolled at 6 and 11, and the removal of 6..=10
    // ran but that of 1..=5 did not: a gap (5 -> 11) and damage, both in
    // compacted entries.
    std::fs::remove_file(only_file(dir.path())).expect("remove");
    let mut first: Vec<u8> = (1..=5)
        .flat_map(|i| encoded(&data_entry(i, 1, b"payload")))
        .collect();
    first.extend_from_slice(b"torn");
    std::fs::write(dir.path().join(format!("{:020}.log", 1)), first).expect("write");
    let rest: Vec<u8> = (11..=12)
        .flat_map(|i| encoded(&data_entry(i, 1, b"payload")))
        .collect();
    std::fs::write(dir.path().join(format!("{:020}.log", 11)), rest).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(rec.cut, None, "nothing is cut");
    assert_eq!((j.first_index(), j.last_index()), (11, 12));
    assert_eq!(j.entry(12).expect("12").data.as_ref(), b"payload");
}

/// A stamped batch (three messages of `tag`) as a send's entry.
fn batch_entry(index: u64, term: u64, tag: u8) -> Entry {
    let mut b = corelog::BatchBuilder::new();
    let payloads: Vec<Vec<u8>> = (0..3).map(|i| vec![tag.wrapping_add(i); 500]).collect();
    for (i, p) in payloads.iter().enumerate() {
        b.push(corelog::MessageSpec {
            id: i as u128,
            timestamp: 1_000,
            payload: p,
            user_headers: &[],
        });
    }
    let batch = corelog::Batch::admit(b.build().expect("build"), &corelog::Limits::default())
        .expect("admit");
    let mut e = entry(index, term);
    e.context = Bytes::from(vec![1u8; 33]); // the journal does not read it
    e.data = batch.into_stamped(corelog::Stamp {
        partition_id: 1,
        base_offset: 3 * (index - 1),
        base_timestamp: 2_000 + index,
    });
    e
}

#[test]
fn batch_records_are_kept_whole_and_cut_where_their_batch_does_not_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ents: Vec<Entry> = (1..=5).map(|i| batch_entry(i, 1, i as u8)).collect();
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    j.append_as(&ents, |_| record::Kind::VerifiedBatch)
        .expect("append");
    j.sync().expect("sync");
    drop(j);
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((rec.entries, rec.cut.clone(), j.last_index()), (5, None, 5));
    assert_eq!(j.entry(4).expect("4"), &ents[3]);
    drop(j);
    // A payload byte of entry 3 (past the batch header, which the record
    // checksum covers): only the batch's frame checksum sees it.
    let f = only_file(dir.path());
    let mut bytes = std::fs::read(&f).expect("read");
    let one = encoded(&ents[0]).len();
    let data_at = record::PREFIX_LEN + record::BODY_FIXED_LEN + ents[0].context.len();
    bytes[2 * one + data_at + 256 + 48 + 7] ^= 0x10;
    std::fs::write(&f, &bytes).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 2);
    assert!(
        rec.cut
            .as_deref()
            .is_some_and(|c| c.contains("batch record")),
        "{rec:?}"
    );
}

/// A sync run off the journal's owner (`sync_ticket`) vouches for the
/// entries written before it was taken, and for none that a later append
/// replaced: the durable point never covers entries the sync did not see.
#[test]
fn a_sync_ticket_vouches_only_for_the_entries_it_saw() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    let ents: Vec<Entry> = (1..=5).map(|i| data_entry(i, 1, b"payload")).collect();
    j.append(&ents).expect("append");
    let ticket = j.sync_ticket().expect("ticket");
    assert_eq!(j.synced_index(), 0, "nothing synced before the ticket runs");
    // Written after the ticket was taken: not its to vouch for.
    j.append(&[data_entry(6, 1, b"later")]).expect("append");
    ticket.run().expect("sync");
    j.synced_by(&ticket);
    assert_eq!(
        j.synced_index(),
        5,
        "the ticket's entries, not the later one"
    );

    // Entries 4.. replaced by a new term's while a ticket for 1..=6 runs.
    let ticket = j.sync_ticket().expect("ticket");
    j.append(&[data_entry(4, 2, b"replaced"), data_entry(5, 2, b"replaced")])
        .expect("append");
    ticket.run().expect("sync");
    j.synced_by(&ticket);
    assert_eq!(
        j.synced_index(),
        3,
        "a ticket taken before a cut vouches for nothing after it"
    );
    let ticket = j.sync_ticket().expect("ticket");
    assert!(ticket.syncs(), "entries were written since the last ticket");
    ticket.run().expect("sync");
    j.synced_by(&ticket);
    assert_eq!(j.synced_index(), 5);
    // Nothing written since: the next ticket leaves the sync to the last.
    let quiet = j.sync_ticket().expect("ticket");
    assert!(!quiet.syncs(), "nothing written since the last ticket");
    j.synced_by(&quiet);
    assert_eq!(j.synced_index(), 5);
}

/// An applied entry may hold its batch's view instead of the bytes it
/// arrived in, only when the view is that batch: same term at its index,
/// same length, same batch header (which carries the checksum over the
/// rest). Otherwise the entry keeps what it had.
#[test]
fn an_entry_holds_a_view_of_its_batch_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    let batch: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    j.append(&[data_entry(1, 1, &batch), data_entry(2, 1, &batch)])
        .expect("append");
    let view = Bytes::from(batch.clone());
    let ptr = |j: &Journal, i: u64| j.entry(i).expect("held").data.as_ptr();
    let before = j.bytes();

    let mut other_header = batch.clone();
    other_header[255] ^= 1;
    for (index, term, v, what) in [
        (1, 2, view.clone(), "another term"),
        (1, 1, Bytes::from(other_header), "another header"),
        (1, 1, view.slice(..299), "another length"),
        (1, 1, view.slice(..200), "shorter than a header"),
        (3, 1, view.clone(), "past the last entry"),
        (0, 1, view.clone(), "before the first"),
    ] {
        assert!(!j.hold_view(index, term, v), "{what}");
    }
    assert_ne!(ptr(&j, 1), view.as_ptr(), "kept what it had");

    assert!(j.hold_view(1, 1, view.clone()), "its own batch");
    assert_eq!(ptr(&j, 1), view.as_ptr(), "holds the view now");
    assert_eq!(&j.entry(1).expect("held").data[..], &batch[..]);
    assert_eq!(j.bytes(), before, "the same bytes counted");
}

/// The records of entries `from..=to` of `term`, each written after the
/// entry before it (of `term`), the first after an entry of `first_prev`.
fn run_of(from: u64, to: u64, term: u64, first_prev: u64) -> Vec<u8> {
    (from..=to)
        .flat_map(|i| {
            let prev = if i == from { first_prev } else { term };
            encoded_after(&data_entry(i, term, b"payload"), prev)
        })
        .collect()
}

fn file_of(dir: &Path, first: u64) -> std::path::PathBuf {
    dir.join(format!("{first:020}.log"))
}

#[test]
fn recovery_bounds_the_commit_index_by_the_log_and_never_raises_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let hard = |term: u64, commit: u64| {
        let mut hs = raft::eraftpb::HardState::default();
        (hs.term, hs.vote, hs.commit) = (term, 1, commit);
        hs
    };
    {
        let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
        j.set_hard_state(&hard(2, 3)).expect("hard state");
    }
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(
        j.hard_state().commit,
        3,
        "entries 4 and 5 are held, not known committed"
    );
    // A commit index past the last entry the files hold (entries lost with
    // the page cache after the state file was written): bounded by it.
    j.set_hard_state(&hard(3, 9)).expect("hard state");
    drop(j);
    let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.hard_state().commit, 5);
}

#[test]
fn recovery_counts_the_bytes_it_keeps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = {
        let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
        let ents: Vec<Entry> = (1..=5).map(|i| data_entry(i, 1, b"payload")).collect();
        j.append(&ents).expect("append");
        j.sync().expect("sync");
        j.bytes()
    };
    let len = std::fs::metadata(only_file(dir.path()))
        .expect("meta")
        .len();
    assert_eq!(written, len);
    let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.bytes(), len, "the same count after a reopen");
}

#[test]
fn recovery_cuts_a_first_record_written_after_another_history_than_the_snapshot() {
    // A snapshot at entry 5 of term 2, then a file from entry 6 on: its
    // first record must say it was written after an entry of term 2.
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
        j.apply_snapshot(&snapshot(5, 2)).expect("snapshot");
    }
    std::fs::write(file_of(dir.path(), 6), run_of(6, 8, 2, 2)).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.cut.as_deref()), (8, None), "{rec:?}");
    drop(j);
    // Written after an entry 5 of term 1: a history the snapshot is not.
    std::fs::write(file_of(dir.path(), 6), run_of(6, 8, 2, 1)).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(j.last_index(), 5);
    assert!(
        rec.cut.as_deref().is_some_and(
            |c| c.contains("entry 6") && c.contains("written after an entry of term 1")
        ),
        "{rec:?}"
    );
}

#[test]
fn recovery_cuts_a_later_file_in_place_and_removes_the_ones_after_it() {
    // Three files: entries 1..=5, 6..=8 with a torn tail, and 20 (which
    // does not continue them). The second is cut after entry 8, keeping
    // its whole records; the third goes.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(file_of(dir.path(), 1), run_of(1, 5, 1, 0)).expect("write");
    let mut second = run_of(6, 8, 1, 1);
    let whole = second.len() as u64;
    second.extend_from_slice(b"torn");
    std::fs::write(file_of(dir.path(), 6), second).expect("write");
    std::fs::write(file_of(dir.path(), 20), run_of(20, 20, 1, 1)).expect("write");
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("open");
    assert_eq!((j.last_index(), rec.removed_files), (8, 1), "{rec:?}");
    drop(j);
    assert_eq!(
        std::fs::metadata(file_of(dir.path(), 6))
            .expect("kept")
            .len(),
        whole
    );
    assert!(!file_of(dir.path(), 20).exists());
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(
        (j.last_index(), rec.cut),
        (8, None),
        "nothing lost at the next open"
    );
}

#[test]
fn recovery_cuts_a_first_file_damaged_at_its_start_to_empty_and_keeps_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    five(dir.path());
    let f = only_file(dir.path());
    let mut bytes = std::fs::read(&f).expect("read");
    bytes[0] ^= 0xff;
    std::fs::write(&f, &bytes).expect("write");
    let (mut j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.removed_files), (0, 0), "{rec:?}");
    assert!(rec.cut.is_some());
    assert_eq!(std::fs::metadata(&f).expect("kept").len(), 0);
    let ents: Vec<Entry> = (1..=3).map(|i| data_entry(i, 2, b"new")).collect();
    j.append(&ents).expect("append");
    j.sync().expect("sync");
    drop(j);
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.cut.as_deref()), (3, None), "{rec:?}");
    assert_eq!(j.entry(3).expect("3").data.as_ref(), b"new");
}

/// `n` entries from `from` of `term`, each holding `size` bytes of data.
fn entries_of(from: u64, n: u64, term: u64, size: usize) -> Vec<Entry> {
    (from..from + n)
        .map(|i| data_entry(i, term, &vec![i as u8; size]))
        .collect()
}

fn log_files(dir: &Path) -> Vec<u64> {
    let mut firsts: Vec<u64> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    firsts.sort_unstable();
    firsts
}

fn files_len(dir: &Path) -> u64 {
    log_files(dir)
        .iter()
        .map(|f| std::fs::metadata(file_of(dir, *f)).expect("meta").len())
        .sum()
}

#[test]
fn a_new_journal_is_marked_new_until_it_has_caught_up_also_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), &conf()).expect("open");
    assert!(j.is_new());
    let first = j.new_incarnation().expect("read").expect("new");
    drop(j);
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert!(j.is_new(), "still new: it has not caught up");
    // Its incarnation is kept; a journal made anew (a wiped directory)
    // draws another, so peers tell the two apart.
    assert_eq!(j.new_incarnation().expect("read"), Some(first));
    let other = tempfile::tempdir().expect("tempdir");
    let (k, _) = Journal::open(other.path(), &conf()).expect("open");
    let second = k.new_incarnation().expect("read").expect("new");
    assert!(
        first != 0 && second != 0 && first != second,
        "{first} {second}"
    );
    // A marker that cannot be removed: an error, and still new.
    let marker = dir.path().join("new");
    std::fs::remove_file(&marker).expect("remove");
    std::fs::create_dir(&marker).expect("a directory where the marker is");
    assert!(matches!(
        j.caught_up(),
        Err(JournalError::Io { op: "remove", .. })
    ));
    assert!(j.is_new());
    std::fs::remove_dir(&marker).expect("remove");
    // An older corelog's marker, empty: incarnation 0.
    std::fs::write(&marker, b"").expect("marker");
    assert_eq!(j.new_incarnation().expect("read"), Some(0));
    j.caught_up().expect("caught up");
    assert!(!j.is_new());
    assert_eq!(j.new_incarnation().expect("read"), None);
    j.caught_up().expect("caught up again: nothing to remove");
    drop(j);
    let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert!(!j.is_new(), "an existing journal is never new again");
}

#[test]
fn cut_from_cuts_a_held_suffix_durably_and_nothing_outside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    j.append(&entries_of(1, 8, 1, 100)).expect("append");
    j.compact(2, Bytes::new()).expect("compact");
    for outside in [0, 1, 2, 9, 20] {
        j.cut_from(outside).expect("cut");
        assert_eq!(
            (j.first_index(), j.last_index()),
            (3, 8),
            "cut from {outside}"
        );
    }
    j.cut_from(8).expect("cut the last");
    assert_eq!(j.last_index(), 7);
    j.cut_from(6).expect("cut");
    assert_eq!(j.last_index(), 5);
    assert_eq!(j.synced_index(), 5, "the cut is synced");
    let one = record::len(&entries_of(1, 1, 1, 100)[0]);
    assert_eq!(j.bytes(), 3 * one, "entries 3..=5 held");
    drop(j);
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.first_index(), j.last_index()), (3, 5));
    j.cut_from(3).expect("cut all after the snapshot");
    assert_eq!((j.first_index(), j.last_index()), (3, 2));
    drop(j);
    let (j, rec) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.last_index(), rec.cut.as_deref()), (2, None), "{rec:?}");
}

/// Opens the journal in `dir` again and checks that it holds `first..=last`
/// with nothing cut.
fn reopened(dir: &Path, first: u64, last: u64) -> Journal {
    let (j, rec) = Journal::open(dir, &conf()).expect("reopen");
    assert_eq!(
        (j.first_index(), j.last_index(), rec.cut.as_deref()),
        (first, last, None)
    );
    j
}

#[test]
fn files_roll_at_64_mib_and_cuts_compactions_and_snapshots_span_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mib = 1 << 20;
    let (mut j, _) = Journal::open(d, &conf()).expect("open");
    j.append(&entries_of(1, 70, 1, mib)).expect("append");
    j.sync().expect("sync");
    // 64 records of a MiB and their heads pass 64 MiB: the 65th rolls.
    assert_eq!(log_files(d), vec![1, 65]);
    assert_eq!(j.bytes(), files_len(d));
    drop(j);
    let mut j = reopened(d, 1, 70);
    assert_eq!(j.entry(66).expect("66").data[..], vec![66u8; mib][..]);
    assert_eq!(j.bytes(), files_len(d));
    // A conflict from 60 on, where the open found the records: the second
    // file goes, the first is cut.
    j.append(&entries_of(60, 3, 2, 100)).expect("append");
    j.sync().expect("sync");
    assert_eq!(log_files(d), vec![1]);
    assert_eq!((j.last_index(), j.bytes()), (62, files_len(d)));
    // It rolls again past 64 MiB, and a conflict reaching back into the
    // first file, where this run wrote the records, does the same.
    j.append(&entries_of(63, 7, 2, mib)).expect("append");
    assert_eq!(log_files(d), vec![1, 68]);
    j.append(&entries_of(63, 1, 3, 100)).expect("append");
    j.sync().expect("sync");
    assert_eq!(log_files(d), vec![1]);
    assert_eq!((j.last_index(), j.bytes()), (63, files_len(d)));
    drop(j);
    let mut j = reopened(d, 1, 63);
    assert_eq!(
        (j.entry(59).expect("59").term, j.entry(60).expect("60").term),
        (1, 2)
    );
    assert_eq!(j.entry(63).expect("63").term, 3);
    // Files 1, 69 and 133; a compaction through 68, the first file's last
    // entry, drops it (off the caller's thread); a conflict in the second
    // removes the third.
    j.append(&entries_of(64, 70, 3, mib)).expect("append");
    assert_eq!(log_files(d), vec![1, 69, 133]);
    j.compact(68, Bytes::new()).expect("compact");
    assert_eq!(j.first_index(), 69);
    j.append(&entries_of(100, 1, 4, 100)).expect("append");
    j.sync().expect("sync");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log_files(d) != vec![69] {
        assert!(
            std::time::Instant::now() < deadline,
            "files {:?}",
            log_files(d)
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(j);
    let mut j = reopened(d, 69, 100);
    assert_eq!(j.entry(99).expect("99").data[..], vec![99u8; mib][..]);
    assert_eq!(j.entry(100).expect("100").term, 4);
    // A snapshot the leader sent replaces every file; the journal goes on.
    let ticket = j.sync_ticket().expect("ticket");
    j.apply_snapshot(&snapshot(95, 4)).expect("snapshot");
    assert_eq!(log_files(d), Vec::<u64>::new());
    assert_eq!((j.first_index(), j.last_index(), j.bytes()), (96, 95, 0));
    j.apply_snapshot(&snapshot(95, 4))
        .expect("the same snapshot again");
    j.append(&entries_of(96, 3, 4, 100)).expect("append");
    ticket.run().expect("sync");
    j.synced_by(&ticket);
    assert_eq!(
        j.synced_index(),
        95,
        "a ticket for 69..=100 taken before the snapshot vouches for nothing after it"
    );
    j.sync().expect("sync");
    drop(j);
    reopened(d, 96, 98);
    assert_eq!(log_files(d), vec![96]);
}

#[test]
fn a_vote_is_written_through_when_it_changes_also_within_a_term() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hard = |term: u64, vote: u64| {
        let mut hs = raft::eraftpb::HardState::default();
        (hs.term, hs.vote) = (term, vote);
        hs
    };
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    j.set_hard_state(&hard(4, 0))
        .expect("a new term, no vote yet");
    j.set_hard_state(&hard(4, 2)).expect("a vote in that term");
    drop(j);
    let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!(
        (j.hard_state().term, j.hard_state().vote),
        (4, 2),
        "a node that forgot its vote could vote twice in a term"
    );
}

/// A pointer record's pointer is held from its write on, not only once an
/// open has read it back: a new leader's entries replacing it in the same
/// run find where to cut the partition's log by it (`group/write.rs`).
#[test]
fn a_pointer_is_held_from_its_write_and_after_a_reopen() {
    use corelog_replica::journal::{Kind, Pointer};
    let dir = tempfile::tempdir().expect("tempdir");
    let p = Pointer {
        base_offset: 40,
        batch_length: 1_556,
        batch_checksum: 0x1234_5678_9abc_def0,
        message_count: 3,
    };
    let (mut j, _) = Journal::open(dir.path(), &conf()).expect("open");
    j.append_as(&[entry(1, 1), entry(2, 1)], |e| {
        if e.index == 2 {
            Kind::Pointer(p)
        } else {
            Kind::Plain
        }
    })
    .expect("append");
    assert_eq!(
        (j.pointer(1), j.pointer(2), j.pointer(3)),
        (None, Some(p), None)
    );
    j.sync().expect("sync");
    drop(j);
    let (j, _) = Journal::open(dir.path(), &conf()).expect("reopen");
    assert_eq!((j.pointer(1), j.pointer(2)), (None, Some(p)));
}
