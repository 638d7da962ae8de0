//! GET_SNAPSHOT_FILE: a zip archive of what helps diagnose this server,
//! one text file per section asked for, named as Iggy's server names them
//! (`<section>.txt`). The sections are corelog's own: the data directory's
//! files and sizes (`filesystem_overview`), this process and its threads
//! (`process_list`), the engine's metrics and the client counters, its
//! I/O and the host's load and memory (`resource_usage`), the server's settings (`server_config`), a note that
//! the logs go to stderr (`server_logs`), and `test` (the word "test", as
//! Iggy's clients check). Nothing is run in a shell.

use iggy_common::{SnapshotCompression, SystemSnapshotType};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// Entries of the data directory listed at most (the rest are counted).
const MAX_LISTED: usize = 20_000;

/// Why no archive is made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// `all` with other sections, or no section.
    #[error("`all` cannot be combined with other sections, and at least one is needed")]
    BadSections,
    /// A compression other than stored or deflated.
    #[error("compression {0} is not offered (stored and deflated are)")]
    Compression(SnapshotCompression),
    /// Writing the archive failed.
    #[error("writing the archive: {0}")]
    Zip(#[from] zip::result::ZipError),
    /// Writing an entry failed.
    #[error("writing an entry: {0}")]
    Io(#[from] std::io::Error),
}

/// What the archive describes.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The data directory.
    pub dir: std::path::PathBuf,
    /// The server's settings, as text.
    pub settings: String,
    /// The engine's metrics (`corelog::Metrics`: per shard appends,
    /// latencies, fdatasyncs, polls, queue) and the server's client
    /// counters, as text: what Iggy's GET_STATS has no field for.
    pub metrics: String,
}

/// The archive of `sections`, compressed as asked.
pub fn archive(
    subject: &Subject,
    sections: &[SystemSnapshotType],
    compression: SnapshotCompression,
) -> Result<Vec<u8>, SnapshotError> {
    let all = sections.contains(&SystemSnapshotType::All);
    if sections.is_empty() || (all && sections.len() > 1) {
        return Err(SnapshotError::BadSections);
    }
    let sections = if all {
        SystemSnapshotType::all_snapshot_types()
    } else {
        sections.to_vec()
    };
    let method = match compression {
        SnapshotCompression::Stored => zip::CompressionMethod::Stored,
        SnapshotCompression::Deflated => zip::CompressionMethod::Deflated,
        other => return Err(SnapshotError::Compression(other)),
    };
    let options = zip::write::SimpleFileOptions::default().compression_method(method);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for section in &sections {
        zip.start_file(format!("{section}.txt"), options)?;
        zip.write_all(content(subject, section).as_bytes())?;
    }
    Ok(zip.finish()?.into_inner())
}

fn content(subject: &Subject, section: &SystemSnapshotType) -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| format!("{p}: {e}\n"));
    match section {
        SystemSnapshotType::Test => "test\n".to_owned(),
        SystemSnapshotType::FilesystemOverview => listing(&subject.dir),
        SystemSnapshotType::ProcessList => {
            let mut out = read("/proc/self/status");
            out.push_str("\nthreads:\n");
            for task in std::fs::read_dir("/proc/self/task")
                .into_iter()
                .flatten()
                .flatten()
            {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{} {}",
                    task.file_name().to_string_lossy(),
                    comm.trim()
                );
            }
            out
        }
        SystemSnapshotType::ResourceUsage => {
            let mut out = format!("== corelog\n{}\n", subject.metrics);
            for p in ["/proc/self/io", "/proc/loadavg", "/proc/meminfo"] {
                let _ = write!(out, "== {p}\n{}\n", read(p));
            }
            out
        }
        SystemSnapshotType::ServerLogs => {
            "corelog-server logs to stderr (RUST_LOG sets the filter); it keeps no log files.\n"
                .to_owned()
        }
        SystemSnapshotType::ServerConfig | SystemSnapshotType::All => subject.settings.clone(),
    }
}

/// Every file under `dir` with its size, sorted, at most [`MAX_LISTED`].
fn listing(dir: &Path) -> String {
    let mut files = Vec::new();
    let mut left = vec![dir.to_path_buf()];
    let mut more = 0usize;
    while let Some(d) = left.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => left.push(path),
                _ if files.len() >= MAX_LISTED => more += 1,
                _ => {
                    let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    let name = path
                        .strip_prefix(dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    files.push((name, len));
                }
            }
        }
    }
    files.sort();
    let mut out = format!("{}\n", dir.display());
    for (name, len) in &files {
        let _ = writeln!(out, "{len:>14} {name}");
    }
    if more > 0 {
        let _ = writeln!(out, "... and {more} more files");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn entries(bytes: Vec<u8>) -> Vec<(String, String)> {
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a zip");
        (0..zip.len())
            .map(|i| {
                let mut f = zip.by_index(i).expect("entry");
                let mut text = String::new();
                f.read_to_string(&mut text).expect("text");
                (f.name().to_owned(), text)
            })
            .collect()
    }

    #[test]
    fn sections_become_named_files_and_all_means_every_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("partitions/7")).expect("dirs");
        std::fs::write(dir.path().join("partitions/7/0.log"), [0u8; 300]).expect("file");
        let subject = Subject {
            dir: dir.path().to_path_buf(),
            settings: "fsync = batch\n".into(),
            metrics: "shard 0: 3 appends".into(),
        };
        let test = archive(
            &subject,
            &[SystemSnapshotType::Test],
            SnapshotCompression::Stored,
        );
        assert_eq!(
            entries(test.expect("archive")),
            vec![("test.txt".to_owned(), "test\n".to_owned())]
        );
        let all = archive(
            &subject,
            &[SystemSnapshotType::All],
            SnapshotCompression::Deflated,
        )
        .expect("archive");
        let all = entries(all);
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "filesystem_overview.txt",
                "process_list.txt",
                "resource_usage.txt",
                "server_logs.txt",
                "server_config.txt"
            ]
        );
        assert!(
            all[0].1.contains("           300 partitions/7/0.log"),
            "{}",
            all[0].1
        );
        assert_eq!(all[4].1, "fsync = batch\n");
        for bad in [
            vec![],
            vec![SystemSnapshotType::All, SystemSnapshotType::Test],
        ] {
            assert!(matches!(
                archive(&subject, &bad, SnapshotCompression::Stored),
                Err(SnapshotError::BadSections)
            ));
        }
        assert!(matches!(
            archive(
                &subject,
                &[SystemSnapshotType::Test],
                SnapshotCompression::Zstd
            ),
            Err(SnapshotError::Compression(_))
        ));
    }
}
