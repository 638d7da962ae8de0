//! What recovery shares between reading a segment and acting on it: one
//! segment file opened and mapped, and where whole batches taken out go.

use crate::io::Mapping;
use std::path::PathBuf;

/// The directory, inside a partition's, where recovery and repair move
/// whole batches they take out of the log.
pub const ASIDE_DIR: &str = "aside";

/// One segment file, opened and mapped for recovery.
pub(super) struct Opened<F> {
    pub base: u64,
    pub path: PathBuf,
    pub index_path: PathBuf,
    pub file: F,
    pub map: Mapping,
    pub len: u64,
    pub stored: Vec<u8>,
}
