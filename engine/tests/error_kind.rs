//! `RequestError::kind()`, `partition()`, `is_retryable()` and
//! `bad_batch()` over every variant, whichever enum nests the cause.
#![allow(clippy::unwrap_used)]

use corelog::{
    AppendError, BatchError, CutError, Damage, ErrorKind, LogError, LogOpenError, Poison,
    RequestError,
};
use std::path::PathBuf;
use std::sync::Arc;

fn io(no_space: bool) -> std::io::Error {
    if no_space {
        std::io::Error::from_raw_os_error(libc_enospc())
    } else {
        std::io::Error::other("the disk said no")
    }
}

/// ENOSPC on Linux.
fn libc_enospc() -> i32 {
    28
}

fn poison(no_space: bool) -> Arc<Poison> {
    Arc::new(Poison {
        op: "fdatasync",
        path: PathBuf::from("/d/1/0.log"),
        error: io(no_space),
    })
}

fn log_io(no_space: bool) -> LogError {
    LogError::Io {
        op: "write",
        path: PathBuf::from("/d/1/0.log"),
        source: Arc::new(io(no_space)),
    }
}

fn too_large() -> BatchError {
    BatchError::TooLarge {
        declared: 100,
        max: 10,
    }
}

/// Every variant: the error, its kind, the partition it names.
fn table() -> Vec<(RequestError, ErrorKind, Option<u64>)> {
    use ErrorKind as K;
    let p = Some(7);
    vec![
        (
            RequestError::Admission {
                partition: 7,
                error: too_large(),
            },
            K::BadBatch,
            p,
        ),
        // What any request on a log meets is a `LogError`, once; an
        // append's carries it in `AppendError::Log` (the engine answers it
        // as `RequestError::Storage`, below), and its kind is the same.
        (
            RequestError::Append(AppendError::Log(LogError::Poisoned {
                partition: 7,
                cause: poison(true),
            })),
            K::NoSpace,
            p,
        ),
        (
            RequestError::Append(AppendError::Log(LogError::Closed { partition: 7 })),
            K::Closed,
            p,
        ),
        (AppendError::TooLarge(too_large()).into(), K::BadBatch, None),
        (
            AppendError::OffsetMismatch {
                expected: 3,
                found: 5,
            }
            .into(),
            K::Replication,
            None,
        ),
        (
            AppendError::PartitionMismatch {
                expected: 3,
                found: 5,
            }
            .into(),
            K::Replication,
            None,
        ),
        (
            AppendError::TimestampBackwards {
                previous: 3,
                found: 1,
            }
            .into(),
            K::Replication,
            None,
        ),
        (
            LogError::Poisoned {
                partition: 7,
                cause: poison(false),
            }
            .into(),
            K::Poisoned,
            p,
        ),
        (
            LogError::Poisoned {
                partition: 7,
                cause: poison(true),
            }
            .into(),
            K::NoSpace,
            p,
        ),
        (log_io(false).into(), K::Io, None),
        (log_io(true).into(), K::NoSpace, None),
        (
            LogError::Corrupt {
                path: "/d/1/0.log".into(),
                position: 512,
                damage: Damage::TornHeader { available: 3 },
            }
            .into(),
            K::Corrupt,
            None,
        ),
        (LogError::Closed { partition: 7 }.into(), K::Closed, p),
        (
            corelog::CommitMarkError::NotGated { partition: 7 }.into(),
            K::Replication,
            p,
        ),
        (
            CutError::NotGated { partition: 7 }.into(),
            K::Replication,
            p,
        ),
        (
            CutError::Committed {
                partition: 7,
                from: 1,
                commit: 4,
            }
            .into(),
            K::Replication,
            p,
        ),
        (
            CutError::NotABatchStart {
                partition: 7,
                from: 1,
                why: "inside a batch",
            }
            .into(),
            K::Replication,
            p,
        ),
        (
            CutError::Log {
                partition: 7,
                from: 1,
                source: Box::new(log_io(true)),
            }
            .into(),
            K::NoSpace,
            p,
        ),
        (
            RequestError::Unopenable {
                partition: 7,
                error: LogOpenError::InvalidConfig {
                    reason: "segment_bytes is 0",
                },
            },
            K::Unopenable,
            p,
        ),
        (
            RequestError::UnknownPartition { partition: 7 },
            K::NotFound,
            p,
        ),
        (
            RequestError::NoSuchShard {
                shard: 4,
                shards: 2,
            },
            K::Misuse,
            None,
        ),
        (
            RequestError::Io {
                op: "remove",
                path: "/d/7".into(),
                source: Arc::new(io(true)),
            },
            K::NoSpace,
            None,
        ),
        (RequestError::ShuttingDown, K::ShuttingDown, None),
        (RequestError::ShardFailed { shard: 1 }, K::ShardFailed, None),
        (
            RequestError::QueueClosed { shard: 1 },
            K::ShuttingDown,
            None,
        ),
        (RequestError::WouldBlockShard, K::Misuse, None),
        (
            LogError::TooManyConsumers {
                partition: 7,
                consumer: 4,
                max: 3,
            }
            .into(),
            K::Limit,
            p,
        ),
    ]
}

#[test]
fn every_variant_has_its_kind_and_names_its_partition() {
    for (e, kind, partition) in table() {
        assert_eq!(e.kind(), kind, "{e:?}");
        assert_eq!(e.partition(), partition, "{e:?}");
        assert_eq!(
            e.is_retryable(),
            matches!(kind, ErrorKind::Closed | ErrorKind::NoSpace),
            "{e:?}"
        );
        assert_eq!(
            e.bad_batch().is_some(),
            kind == ErrorKind::BadBatch,
            "{e:?}"
        );
    }
}

#[test]
fn every_shutdown_error_has_its_kind_and_names_its_partition() {
    use corelog::ShutdownError as S;
    use ErrorKind as K;
    let table = [
        (
            S::CloseFailed {
                partition: 7,
                error: log_io(false),
            },
            K::Io,
            Some(7),
        ),
        (
            S::CloseFailed {
                partition: 8,
                error: log_io(true),
            },
            K::NoSpace,
            Some(8),
        ),
        (
            S::TimedOut {
                running: vec![1],
                waited: std::time::Duration::from_secs(1),
            },
            K::ShuttingDown,
            None,
        ),
        (S::WouldBlockShard, K::Misuse, None),
    ];
    for (e, kind, partition) in table {
        assert_eq!(e.kind(), kind, "{e:?}");
        assert_eq!(e.partition(), partition, "{e:?}");
        assert!(matches!(
            corelog::Error::from(e),
            corelog::Error::Shutdown(_)
        ));
    }
}

#[test]
fn a_refused_batch_says_what_is_wrong_whichever_layer_refused_it() {
    let admission = RequestError::Admission {
        partition: 7,
        error: too_large(),
    };
    let log = RequestError::from(AppendError::TooLarge(too_large()));
    for e in [admission, log] {
        assert!(matches!(
            e.bad_batch(),
            Some(BatchError::TooLarge {
                declared: 100,
                max: 10
            })
        ));
    }
}

/// Every type a public signature names can be named by an embedder from
/// `corelog` alone: a refused batch's header field, a stamped header, a
/// tail cut's reason and a set-aside file.
#[test]
fn the_types_in_public_signatures_are_exported() {
    let mut b = corelog::BatchBuilder::new();
    b.push(corelog::MessageSpec {
        id: 1,
        timestamp: 1,
        payload: b"x",
        user_headers: b"",
    });
    let mut bytes = b.build().expect("batch");
    // batch_length (bytes 32..40) one longer than the bytes.
    let len = bytes.len() as u64 + 1;
    bytes[32..40].copy_from_slice(&len.to_le_bytes());
    let refused = corelog::Batch::admit(bytes, &corelog::Limits::default()).expect_err("refused");
    let field: Option<corelog::HeaderField> = refused.header_field();
    assert_eq!(field, Some(corelog::HeaderField::BatchLength));
    fn _named(
        _: corelog::CutReason,
        _: corelog::SetAsideFile,
        _: corelog::StampedHeader,
        _: corelog::TailCut,
    ) {
    }
}
