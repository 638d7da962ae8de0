//! A local run's set-up: how long to append, where the data goes, the
//! progress bar.

use crate::args::Args;
use indicatif::{ProgressBar, ProgressStyle};

/// How long to append: `--total-bytes`, or `--duration`, or by default
/// 20 seconds. Timed runs also stop at a byte cap (a quarter of the free
/// space where the data goes) so a fast disk cannot fill up.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Bytes to append (a cap for timed runs).
    pub total: Option<u64>,
    /// Seconds to append.
    pub duration: Option<f64>,
}

/// The default append time when neither --total-bytes nor --duration is given.
pub const DEFAULT_DURATION: f64 = 20.0;

pub fn budget(args: &Args, dir: &std::path::Path) -> Result<Budget, String> {
    let free = fs4::available_space(dir).unwrap_or(u64::MAX);
    match (args.total_bytes, args.duration) {
        (Some(t), _) if t.saturating_add(t / 10) > free => Err(format!(
            "--total-bytes {t} does not fit the {free} bytes free in {}",
            dir.display()
        )),
        (Some(t), _) => Ok(Budget {
            total: Some(t),
            duration: None,
        }),
        (None, d) => Ok(Budget {
            total: Some(free / 4),
            duration: Some(d.unwrap_or(DEFAULT_DURATION)),
        }),
    }
}

/// The budget of a run against a remote server, whose disk the bench
/// cannot see: `--total-bytes`, or `--duration` (default 20 s).
pub fn budget_for_remote(args: &Args) -> (Option<u64>, Option<f64>) {
    match args.total_bytes {
        Some(t) => (Some(t), None),
        None => (None, Some(args.duration.unwrap_or(DEFAULT_DURATION))),
    }
}

/// Where the data goes: the given directory (kept) or a temporary one.
pub fn data_dir(args: &Args) -> Result<(std::path::PathBuf, Option<tempfile::TempDir>), String> {
    match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("corelog-bench-")
                .tempdir_in(
                    std::env::var_os("TMPDIR")
                        .map(std::path::PathBuf::from)
                        .unwrap_or_else(|| std::path::PathBuf::from("/var/tmp")),
                )
                .map_err(|e| format!("temporary directory: {e}"))?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

pub fn progress(args: &Args, total: Option<u64>, duration: Option<f64>) -> ProgressBar {
    if args.quiet {
        return ProgressBar::hidden();
    }
    match (total, duration) {
        (Some(t), None) => {
            let pb = ProgressBar::new(t);
            pb.set_style(
                ProgressStyle::with_template(
                    "{msg:8} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            pb
        }
        _ => {
            let pb = ProgressBar::new((duration.unwrap_or(0.0) * 10.0) as u64);
            pb.set_style(
                ProgressStyle::with_template("{msg:8} [{bar:40}] {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb
        }
    }
}
