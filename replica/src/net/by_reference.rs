//! A Raft frame written to a peer's socket, its entries' batches sent
//! from the segment files where the leader wrote them when it can:
//! `sendfile(2)` hands the kernel the page-cache pages instead of copying
//! each byte through a user buffer into the socket, as Kafka serves its
//! followers. The bytes built in memory (the frame's prefix, and each
//! batch's 256-byte header) go with vectored writes.
//!
//! Why each batch's header goes from memory: the file's bytes are read
//! by the kernel while the socket takes them, after this call returns
//! too (loopback and a retransmit read the pages later), and a batch
//! above the commit mark can be cut and its bytes rewritten by a new
//! leader's (`PartitionLog::cut_suffix`) when this node steps down. The
//! header from the leader's memory carries the batch checksum, over the
//! header and every frame's checksum, so a follower that receives other
//! bytes than the leader wrote refuses the batch (`inbox::verified_batches`)
//! instead of storing it; and a cut file only shortens the send (an error,
//! the connection dropped, Raft resends), never a fault in this process:
//! nothing here reads the mapping.
#![allow(unsafe_code)]

use super::raft_frame::Encoded;
use corelog::{WrittenBatch, BATCH_HEADER_LEN};
use std::io::{self, IoSlice, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Writes `enc` on `s`; returns how many of its bytes went from files.
pub(super) fn write_encoded(s: &mut TcpStream, enc: &Encoded) -> io::Result<u64> {
    let mut mem = vec![IoSlice::new(&enc.prefix)];
    let mut by_reference = 0u64;
    for (i, d) in enc.data.iter().enumerate() {
        let file = enc.files.get(i).and_then(|f| file_of(d, f.as_ref()?));
        let Some((fd, at)) = file else {
            mem.push(IoSlice::new(d));
            continue;
        };
        mem.push(IoSlice::new(&d[..BATCH_HEADER_LEN]));
        write_all_vectored(s, &mut mem)?;
        mem.clear();
        let rest = d.len() - BATCH_HEADER_LEN;
        send_file(s, fd, at + BATCH_HEADER_LEN as u64, rest)?;
        by_reference += rest as u64;
    }
    write_all_vectored(s, &mut mem)?;
    Ok(by_reference)
}

/// Where past its header `data`'s batch lies in a file: only when `w`
/// names a file and is a batch of the same length with frames past its
/// header.
fn file_of<'a>(data: &[u8], w: &'a WrittenBatch) -> Option<(BorrowedFd<'a>, u64)> {
    (w.len() == data.len() && data.len() > BATCH_HEADER_LEN)
        .then(|| w.file())
        .flatten()
}

fn write_all_vectored(s: &mut TcpStream, slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    let mut rest = slices;
    while !rest.is_empty() {
        match s.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends `len` bytes of `fd` from `at` on `s` (a blocking socket with a
/// write timeout: a stalled peer ends the call with an error).
fn send_file(s: &TcpStream, fd: BorrowedFd<'_>, at: u64, mut len: usize) -> io::Result<()> {
    let mut offset = libc::off_t::try_from(at).map_err(|_| io::ErrorKind::InvalidInput)?;
    while len > 0 {
        // `fd` is borrowed from the WrittenBatch's mapping, which keeps it
        // open for the call; the socket is `s`'s, borrowed for it too.
        // SAFETY: sendfile(2) touches no memory of ours but `offset`, a live local.
        let sent = unsafe { libc::sendfile(s.as_raw_fd(), fd.as_raw_fd(), &mut offset, len) };
        if sent < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if sent == 0 {
            // The file ends before the batch does: it was cut.
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        len -= (sent as usize).min(len);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::write_encoded;
    use crate::net::raft_frame;
    use corelog::replication::ReplicaLog;
    use raft::eraftpb::{Entry, Message};
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// What a peer reads of `msg` written by [`write_encoded`] with
    /// `files`, and the bytes it sent from them.
    fn over_loopback(
        msg: &Message,
        files: Vec<Option<corelog::WrittenBatch>>,
    ) -> (std::io::Result<u64>, Vec<u8>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut rx, _) = l.accept().expect("accept");
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let _ = rx.read_to_end(&mut got);
            got
        });
        let mut enc = raft_frame::encode(1, msg.clone()).expect("encode");
        enc.files = files;
        let sent = write_encoded(&mut tx, &enc);
        drop(tx);
        (sent, reader.join().expect("reader"))
    }

    /// [`write_encoded`] of `msg`, twice over, to a peer that closed its
    /// socket at once.
    fn to_closed_peer(
        msg: &Message,
        files: Vec<Option<corelog::WrittenBatch>>,
    ) -> std::io::Result<u64> {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        drop(l.accept().expect("accept"));
        let mut m = msg.clone();
        let e = m.get_entries()[0].clone();
        m.mut_entries().push(e);
        let mut enc = raft_frame::encode(1, m).expect("encode");
        enc.files = files;
        write_encoded(&mut tx, &enc)?;
        write_encoded(&mut tx, &enc)
    }

    /// A batch sent from its segment file reaches the peer as the same
    /// bytes as one sent from memory, all of it but its header from the
    /// file; a peer gone or a file cut short under the send ends it with an
    /// error.
    #[test]
    fn a_batch_from_its_file_is_the_bytes_from_memory_and_a_gone_peer_or_cut_file_fails_the_send() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = corelog::Engine::open(corelog::Config {
            shards: Some(1),
            pin_threads: false,
            ..corelog::Config::new(dir.path().join("engine"))
        })
        .expect("engine");
        let h = engine.handle();
        let payload = vec![7u8; 3000];
        for n in [1, 3] {
            let mut b = corelog::BatchBuilder::new();
            for id in 0..n {
                b.push(corelog::MessageSpec {
                    id,
                    timestamp: 5,
                    payload: &payload,
                    user_headers: &[],
                });
            }
            h.append(2, b.build().expect("build"))
                .wait()
                .expect("append");
        }
        // The second batch, past the first in the file.
        let first = h.read_written(2, 0).wait().expect("read").expect("written");
        let written = h.read_written(2, 1).wait().expect("read").expect("written");
        assert_eq!(written.file().expect("a file").1, first.len() as u64);
        let data = written.bytes();
        let mut msg = Message::default();
        msg.to = 2;
        msg.set_entries(
            vec![Entry {
                index: 9,
                term: 2,
                data: data.clone(),
                ..Entry::default()
            }]
            .into(),
        );
        let (plain, from_memory) = over_loopback(&msg, Vec::new());
        assert_eq!(plain.expect("sent"), 0, "nothing from files");
        let (sent, from_file) = over_loopback(&msg, vec![Some(written.clone())]);
        let past_header = (data.len() - corelog::BATCH_HEADER_LEN) as u64;
        assert_eq!(sent.expect("sent"), past_header, "all but the header");
        assert_eq!(from_file, from_memory, "the same bytes on the wire");
        let decoded = raft_frame::decode(&bytes::Bytes::from(from_file[9..].to_vec()))
            .expect("a whole frame");
        assert_eq!(decoded.get_entries()[0].data, data);

        // Another batch's bytes (of another length) are not sent for it.
        let mut other = msg.clone();
        other.mut_entries()[0].data = data.slice(..data.len() - 1);
        let (sent, _) = over_loopback(&other, vec![Some(written.clone())]);
        assert_eq!(
            sent.expect("sent"),
            0,
            "a length that differs goes from memory"
        );

        // A peer gone (its socket closed): the send fails, at once.
        let (tx_done, rx_done) = std::sync::mpsc::channel();
        let (m, w) = (msg.clone(), written.clone());
        std::thread::spawn(move || {
            let _ = tx_done.send(to_closed_peer(&m, vec![Some(w.clone()), Some(w)]));
        });
        let gone = rx_done
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the send to a closed peer returned");
        assert!(gone.is_err(), "sent to a closed peer: {gone:?}");

        // The segment file cut under the batch (as a new leader's suffix
        // cut would): the send fails, nothing here faults.
        let log = dir
            .path()
            .join("engine/partitions/2")
            .join(format!("{:020}.log", 0));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .expect("open")
            .set_len(100)
            .expect("cut");
        let (sent, _) = over_loopback(&msg, vec![Some(written)]);
        assert_eq!(
            sent.expect_err("a cut file").kind(),
            std::io::ErrorKind::UnexpectedEof
        );
        drop(h);
        engine.shutdown().expect("shutdown");
    }
}
