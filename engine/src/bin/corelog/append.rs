//! `corelog append`: producer batches from standard input into a partition.

use crate::args::AppendArgs;
use crate::error::{CliError, Exit};
use corelog::{Batch, Config, Engine, LogConfig};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::Path;

pub(crate) fn open_engine(dir: &Path, log: LogConfig) -> Result<Engine, CliError> {
    Ok(Engine::open(Config {
        shards: Some(1),
        log,
        ..Config::new(dir)
    })?)
}

/// One batch read from standard input.
struct Incoming {
    index: u64,
    start: u64,
    bytes: Vec<u8>,
}

/// Reads the next batch of the stream: Ok(None) at a clean end.
fn read_batch(
    input: &mut impl Read,
    index: u64,
    start: u64,
    limits: &corelog::Limits,
) -> Result<Option<Incoming>, String> {
    let mut header = vec![0u8; corelog_segment::layout::BATCH_HEADER_LEN];
    let got = read_full(input, &mut header).map_err(|e| format!("reading standard input: {e}"))?;
    if got == 0 {
        return Ok(None);
    }
    if got < header.len() {
        return Err(format!("batch {index} (stdin byte {start}): the stream ends after {got} of the 256 header bytes"));
    }
    let declared = corelog_segment::declared_length(&header, limits)
        .map_err(|e| format!("batch {index} (stdin byte {start}): {e}"))?;
    let mut bytes = header;
    bytes.resize(declared as usize, 0);
    let body =
        read_full(input, &mut bytes[256..]).map_err(|e| format!("reading standard input: {e}"))?;
    if 256 + body < declared as usize {
        return Err(format!("batch {index} (stdin byte {start}): batch_length is {declared} but the stream ends after {} bytes", 256 + body));
    }
    Ok(Some(Incoming {
        index,
        start,
        bytes,
    }))
}

fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

pub(crate) fn append(a: AppendArgs) -> Result<Exit, CliError> {
    let log = LogConfig {
        segment_bytes: a.segment_bytes,
        fsync: a.fsync,
        ..LogConfig::default()
    };
    let limits = log.limits;
    let engine = open_engine(&a.dir, log)?;
    // Batches are read on a thread, so appends stream while input arrives.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Incoming, String>>(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let (mut index, mut pos) = (0u64, 0u64);
        loop {
            match read_batch(&mut stdin, index, pos, &limits) {
                Ok(Some(b)) => {
                    pos += b.bytes.len() as u64;
                    index += 1;
                    if tx.send(Ok(b)).is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    let stdout = std::io::stdout();
    let mut pending: VecDeque<(u64, corelog::Reply<corelog::AppendAck>)> = VecDeque::new();
    let mut refused = None;
    let print = |ack: corelog::AppendAck| -> std::io::Result<()> {
        let mut out = stdout.lock();
        writeln!(
            out,
            "{{\"partition\":{},\"base_offset\":{},\"messages\":{},\"bytes\":{}}}",
            a.partition, ack.base_offset, ack.message_count, ack.bytes
        )?;
        out.flush()
    };
    let mut storage_error = None;
    // Up to IN_FLIGHT appends stay in flight while input keeps arriving;
    // when it pauses, every stored batch is reported before waiting for
    // more, so a producer that waits for an acknowledgement gets it.
    const IN_FLIGHT: usize = 32;
    let settle = |pending: &mut VecDeque<(u64, corelog::Reply<corelog::AppendAck>)>,
                  keep: usize|
     -> Result<Option<String>, CliError> {
        while pending.len() > keep {
            let Some((index, reply)) = pending.pop_front() else {
                break;
            };
            match reply.wait() {
                Ok(ack) => print(ack).map_err(|e| CliError::io("write", "standard output", e))?,
                Err(e) => return Ok(Some(format!("batch {index}: {e}"))),
            }
        }
        Ok(None)
    };
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                storage_error = settle(&mut pending, 0)?;
                if storage_error.is_some() {
                    break;
                }
                match rx.recv() {
                    Ok(item) => item,
                    Err(_) => break,
                }
            }
        };
        let incoming = match item {
            Ok(b) => b,
            Err(e) => {
                refused = Some(e);
                break;
            }
        };
        let end = incoming.start + incoming.bytes.len() as u64;
        match Batch::admit(incoming.bytes, &limits) {
            Ok(batch) => pending.push_back((
                incoming.index,
                engine.handle().append_admitted(a.partition, batch),
            )),
            Err(e) => {
                refused = Some(format!(
                    "batch {} (stdin bytes {}..{end}): {e}",
                    incoming.index, incoming.start
                ));
                break;
            }
        }
        storage_error = settle(&mut pending, IN_FLIGHT)?;
        if storage_error.is_some() {
            break;
        }
    }
    for (index, reply) in pending {
        match reply.wait() {
            Ok(ack) if storage_error.is_none() => {
                print(ack).map_err(|e| CliError::io("write", "standard output", e))?
            }
            Ok(_) => {}
            Err(e) => {
                storage_error.get_or_insert(format!("batch {index}: {e}"));
            }
        }
    }
    engine.shutdown().map_err(corelog::Error::from)?;
    if let Some(e) = storage_error {
        eprintln!("corelog append: {e}");
        return Ok(Exit::Failure);
    }
    if let Some(e) = refused {
        eprintln!("corelog append: refused {e}; nothing of it was stored");
        return Ok(Exit::Refused);
    }
    Ok(Exit::Success)
}
