//! The replica network's framing: every frame is
//!
//! ```text
//! 0  len    u32   bytes after this field (kind + group + body)
//! 4  kind   u8
//! 5  group  u32
//! 9  body
//! ```
//!
//! | kind | body |
//! |---|---|
//! | 7 challenge    | a nonce (16 B): the accepting node's first frame (`auth.rs`) |
//! | 1 hello        | node id u64, data groups u32, then a nonce and a proof (`auth.rs`): the connecting node's first frame on a peer connection |
//! | 2 raft         | a raft-rs `Message`: protobuf without the entries' data, then the data verbatim (`raft_frame.rs`) |
//! | 3 fetch        | partition u64, from u64, to u64, then a nonce and a proof: the connecting node's first frame on a fetch connection |
//! | 8 welcome      | the accepting node's proof (32 B) |
//! | 4 batches      | whole stamped batches, back to back, as stored |
//! | 5 fetch end    | the next offset u64 (the fetch is done) |
//! | 6 fetch failed | a message (UTF-8) |
//! | 9 forward      | node id u64, then a nonce and a proof: the connecting node's first frame on a forward connection (`forward.rs`) |
//! | 10 forward send | a send a node that does not lead hands to the leader (`forward.rs`) |
//! | 12 forward offset | a consumer offset's change a node that does not lead hands to the leader (`forward.rs`) |
//! | 11 forward answer | the leader's answer to a forwarded request (`forward.rs`) |
//!
//! A frame longer than [`MAX_FRAME`] or of an unknown kind ends the
//! connection; nothing in a frame can make the reader allocate more.

use bytes::Bytes;
use std::io::{Read, Write};

/// The largest frame accepted: a batch is at most 64 MiB, and raft-rs
/// sends at least one entry per message.
pub const MAX_FRAME: usize = 80 << 20;

/// Frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// First frame of a peer connection.
    Hello = 1,
    /// A Raft message.
    Raft = 2,
    /// First frame of a fetch connection.
    Fetch = 3,
    /// Stored batches.
    Batches = 4,
    /// A fetch is complete.
    FetchEnd = 5,
    /// A fetch failed.
    FetchFailed = 6,
    /// The accepting side's nonce.
    Challenge = 7,
    /// The accepting side's proof.
    Welcome = 8,
    /// First frame of a forward connection.
    Forward = 9,
    /// A forwarded send.
    ForwardSend = 10,
    /// The answer to a forwarded request.
    ForwardAnswer = 11,
    /// A forwarded offset command.
    ForwardOffset = 12,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Raft,
            3 => Kind::Fetch,
            4 => Kind::Batches,
            5 => Kind::FetchEnd,
            6 => Kind::FetchFailed,
            7 => Kind::Challenge,
            8 => Kind::Welcome,
            9 => Kind::Forward,
            10 => Kind::ForwardSend,
            11 => Kind::ForwardAnswer,
            12 => Kind::ForwardOffset,
            _ => return None,
        })
    }
}

/// A frame read off a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it is.
    pub kind: Kind,
    /// The group it is for.
    pub group: u32,
    /// The body (a view of the frame's buffer).
    pub body: Bytes,
}

/// Why a frame cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The connection failed or ended.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The length is impossible.
    #[error("frame of {0} bytes")]
    Length(usize),
    /// Unknown kind byte.
    #[error("unknown frame kind {0}")]
    Kind(u8),
}

/// The 9 bytes before a frame's body.
pub fn head(kind: Kind, group: u32, body_len: usize) -> [u8; 9] {
    let mut h = [0u8; 9];
    h[0..4].copy_from_slice(&((5 + body_len) as u32).to_le_bytes());
    h[4] = kind as u8;
    h[5..9].copy_from_slice(&group.to_le_bytes());
    h
}

/// Writes one frame.
pub fn write(w: &mut impl Write, kind: Kind, group: u32, body: &[u8]) -> std::io::Result<()> {
    w.write_all(&head(kind, group, body.len()))?;
    w.write_all(body)
}

/// Reads one frame.
pub fn read(r: &mut impl Read) -> Result<Frame, FrameError> {
    read_max(r, MAX_FRAME)
}

/// [`read`], refusing a frame longer than `max` bytes before any of its
/// body is read or room for it allocated (a handshake's first frame is a
/// few dozen bytes: a peer that has proved nothing gets no 80 MiB).
pub fn read_max(r: &mut impl Read, max: usize) -> Result<Frame, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if !(5..=max.min(MAX_FRAME)).contains(&len) {
        return Err(FrameError::Length(len));
    }
    // Read into spare capacity: no zeroing of a buffer about to be filled.
    let mut buf = Vec::with_capacity(len);
    let got = r.take(len as u64).read_to_end(&mut buf)?;
    if got < len {
        return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    let kind = Kind::from_u8(buf[0]).ok_or(FrameError::Kind(buf[0]))?;
    let group = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
    let body = Bytes::from(buf).slice(5..);
    Ok(Frame { kind, group, body })
}

/// Little-endian u64s from the front of a body.
pub fn u64s<const N: usize>(body: &[u8]) -> Option<[u64; N]> {
    if body.len() < N * 8 {
        return None;
    }
    let mut out = [0u64; N];
    for (i, v) in out.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[i * 8..i * 8 + 8]);
        *v = u64::from_le_bytes(b);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_frames() {
        let mut out = Vec::new();
        write(&mut out, Kind::Raft, 3, b"hello").expect("write");
        let f = read(&mut &out[..]).expect("read");
        assert_eq!(
            (f.kind, f.group, &f.body[..]),
            (Kind::Raft, 3, &b"hello"[..])
        );
        let mut bad = out.clone();
        bad[4] = 99;
        assert!(matches!(read(&mut &bad[..]), Err(FrameError::Kind(99))));
        let mut huge = out.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(read(&mut &huge[..]), Err(FrameError::Length(_))));
        assert!(read(&mut &out[..out.len() - 1]).is_err());
    }

    /// Every kind a node writes is read back as that kind, by its number
    /// (a kind the reader forgot would end the connection that sent it).
    #[test]
    fn every_kind_reads_back_as_itself() {
        let all = [
            Kind::Hello,
            Kind::Raft,
            Kind::Fetch,
            Kind::Batches,
            Kind::FetchEnd,
            Kind::FetchFailed,
            Kind::Challenge,
            Kind::Welcome,
            Kind::Forward,
            Kind::ForwardSend,
            Kind::ForwardAnswer,
            Kind::ForwardOffset,
        ];
        for (n, kind) in (1u8..).zip(all) {
            assert_eq!(kind as u8, n, "{kind:?}'s number");
            let mut out = Vec::new();
            write(&mut out, kind, 1, b"x").expect("write");
            assert_eq!(read(&mut &out[..]).expect("read").kind, kind);
        }
        assert_eq!(Kind::from_u8(0), None);
        assert_eq!(Kind::from_u8(13), None);
    }
}
