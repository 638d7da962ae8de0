//! `corelog repair`: the explicit way past a recovery that refuses to
//! open a partition (damaged bytes followed by whole batches).

use crate::args::RepairArgs;
use crate::error::{CliError, Exit};
use corelog::cli::DirLock;
use corelog::LogConfig;
use corelog_segment::io::UringStorage;
use corelog_segment::log::PartitionLog;

pub(crate) fn repair(a: RepairArgs) -> Result<Exit, CliError> {
    let _lock = DirLock::acquire(&a.dir)?;
    let dir = a.dir.join("partitions").join(a.partition.to_string());
    if !dir.is_dir() {
        return Err(CliError::UnknownPartition {
            partition: a.partition,
        });
    }
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .map_err(|e| CliError::io("start an io_uring runtime", &a.dir, e))?;
    rt.block_on(async {
        let storage =
            UringStorage::new(64).map_err(|e| CliError::io("set up io_uring", &a.dir, e))?;
        match PartitionLog::repair(storage, &dir, a.partition, LogConfig::default()).await {
            Ok((log, report)) => {
                println!("partition {}: {report}", a.partition);
                log.close().await?;
                Ok(Exit::Success)
            }
            Err(e) => {
                eprintln!("corelog repair: partition {}: {e}", a.partition);
                Ok(Exit::Damage)
            }
        }
    })
}
