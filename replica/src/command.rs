//! What a replicated entry says: its `context` holds the command (a kind
//! byte and fixed fields, little-endian), its `data` the bytes the command
//! carries verbatim (a stamped batch, or the embedder's metadata).
//!
//! ```text
//! kind 1  append        partition u64, client u128, request u64    data: the stamped batch
//! kind 2  store offset  partition u64, consumer u64, offset u64    data: empty
//! kind 3  delete offset partition u64, consumer u64                data: empty
//! kind 4  metadata      base u64 (the metadata index it was made from)  data: the embedder's bytes
//! kind 5  delete segments partition u64, count u64                 data: empty
//! kind 6  offloaded     partition u64, end u64 (the store holds below it)  data: empty
//! ```
//!
//! An entry with an empty context is raft-rs's own (a new leader's empty
//! entry) and applies to nothing.

use bytes::Bytes;

/// Who sent a request: the client's id, its session and the request's
/// number (from Iggy's request header; zeros when unknown). A send with the
/// same three as an earlier one on this node is a repeat: answered from the
/// first, never stored twice (see `group/repeats.rs`). The client and the
/// request number are stored with the entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    /// The client's id (0: unknown; such sends are never repeats).
    pub client: u128,
    /// The session the client signed in under.
    pub session: u64,
    /// Its request number.
    pub request: u64,
}

/// A decoded command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Store a stamped batch in a partition.
    Append {
        /// the engine partition
        partition: u64,
        /// the client's id (from its request header; 0 when unknown)
        client: u128,
        /// the client's request number
        request: u64,
    },
    /// Store a consumer's offset.
    StoreOffset {
        /// the engine partition
        partition: u64,
        /// the consumer key
        consumer: u64,
        /// the offset
        offset: u64,
    },
    /// Forget a consumer's offset.
    DeleteOffset {
        /// the engine partition
        partition: u64,
        /// the consumer key
        consumer: u64,
    },
    /// Delete a partition's oldest sealed segments.
    DeleteSegments {
        /// the engine partition
        partition: u64,
        /// how many
        count: u64,
    },
    /// The partition's manifest in the object store, committed by the
    /// group's leader, holds every offset below `end` (a tier's commit,
    /// replicated so that each node may trim its local copies below it
    /// without asking the store).
    Offloaded {
        /// the engine partition
        partition: u64,
        /// the manifest's end offset
        end: u64,
    },
    /// A metadata change, made from the metadata as of index `base`.
    Meta {
        /// the metadata index the change was computed from
        base: u64,
    },
    /// raft-rs's own entry.
    Empty,
}

/// Why an entry's context is no command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Unknown kind byte.
    #[error("unknown command kind {0}")]
    Kind(u8),
    /// Wrong length for the kind.
    #[error("command kind {kind} with {len} bytes of fields")]
    Length {
        /// the kind
        kind: u8,
        /// bytes after it
        len: usize,
    },
}

impl Command {
    /// The context bytes for this command.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(33);
        match *self {
            Command::Append {
                partition,
                client,
                request,
            } => {
                out.push(1);
                out.extend_from_slice(&partition.to_le_bytes());
                out.extend_from_slice(&client.to_le_bytes());
                out.extend_from_slice(&request.to_le_bytes());
            }
            Command::StoreOffset {
                partition,
                consumer,
                offset,
            } => {
                out.push(2);
                out.extend_from_slice(&partition.to_le_bytes());
                out.extend_from_slice(&consumer.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
            Command::DeleteOffset {
                partition,
                consumer,
            } => {
                out.push(3);
                out.extend_from_slice(&partition.to_le_bytes());
                out.extend_from_slice(&consumer.to_le_bytes());
            }
            Command::DeleteSegments { partition, count } => {
                out.push(5);
                out.extend_from_slice(&partition.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
            }
            Command::Offloaded { partition, end } => {
                out.push(6);
                out.extend_from_slice(&partition.to_le_bytes());
                out.extend_from_slice(&end.to_le_bytes());
            }
            Command::Meta { base } => {
                out.push(4);
                out.extend_from_slice(&base.to_le_bytes());
            }
            Command::Empty => {}
        }
        out
    }

    /// Decodes an entry's context.
    pub fn decode(context: &Bytes) -> Result<Command, CommandError> {
        let Some((&kind, rest)) = context.split_first() else {
            return Ok(Command::Empty);
        };
        let need = match kind {
            1 => 32,
            2 => 24,
            3 | 5 | 6 => 16,
            4 => 8,
            k => return Err(CommandError::Kind(k)),
        };
        if rest.len() != need {
            return Err(CommandError::Length {
                kind,
                len: rest.len(),
            });
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&rest[at..at + 8]);
            u64::from_le_bytes(b)
        };
        Ok(match kind {
            1 => {
                let mut c = [0u8; 16];
                c.copy_from_slice(&rest[8..24]);
                Command::Append {
                    partition: u64_at(0),
                    client: u128::from_le_bytes(c),
                    request: u64_at(24),
                }
            }
            2 => Command::StoreOffset {
                partition: u64_at(0),
                consumer: u64_at(8),
                offset: u64_at(16),
            },
            3 => Command::DeleteOffset {
                partition: u64_at(0),
                consumer: u64_at(8),
            },
            5 => Command::DeleteSegments {
                partition: u64_at(0),
                count: u64_at(8),
            },
            6 => Command::Offloaded {
                partition: u64_at(0),
                end: u64_at(8),
            },
            _ => Command::Meta { base: u64_at(0) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_lengths() {
        for c in [
            Command::Append {
                partition: 3,
                client: u128::MAX - 5,
                request: 9,
            },
            Command::StoreOffset {
                partition: 1,
                consumer: 2,
                offset: 3,
            },
            Command::DeleteOffset {
                partition: 4,
                consumer: 5,
            },
            Command::Meta { base: 77 },
            Command::DeleteSegments {
                partition: 6,
                count: 2,
            },
            Command::Offloaded {
                partition: 7,
                end: 1 << 40,
            },
            Command::Empty,
        ] {
            let bytes = Bytes::from(c.encode());
            assert_eq!(Command::decode(&bytes), Ok(c.clone()));
            if !bytes.is_empty() {
                let cut = bytes.slice(..bytes.len() - 1);
                assert!(Command::decode(&cut).is_err());
            }
        }
        assert_eq!(
            Command::decode(&Bytes::from_static(&[9])),
            Err(CommandError::Kind(9))
        );
    }
}
