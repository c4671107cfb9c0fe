//! patio-fs: patio's FUSE front ends, served through the kernel with the `fuser` crate.
//!
//! * [`passthrough`] — a passthrough filesystem over a source directory: every
//!   operation is forwarded to the real file or directory, reads and writes with
//!   `pread`/`pwrite` on the real descriptor, errors with the real `errno`. Files are
//!   opened in direct-I/O mode (`FOPEN_DIRECT_IO`) so each application request reaches
//!   the daemon with its own offset and size, not as page-cache or readahead chunks.
//!   An [`passthrough::Observer`] sees every read and write that was served.
//! * [`tracing`] — the observer that records those requests into patio-core's trace
//!   model (module `FUSE`, the file's path inside the mount, the caller's pid as rank,
//!   the op) and writes the trace when the mount ends: `patio mount trace`.
//! * [`prefetch`] — the observer that serves every read of a file through
//!   patio-prefetch's engine (one stream reader and policy per open file handle, one
//!   cache budget for the mount, optionally over the slow-store model) and drops
//!   cached bytes that writes overwrite: `patio mount prefetch`.
//! * [`container`] — the container mount: files are patio containers in a backend
//!   directory, one writer (data and index log) per file and writing process, reads
//!   through a cached reader of the merged index: `patio mount container`.
//! * [`segcache`] — the segment-grouping cache mount: reads through patio-cache's
//!   cache (memory, then a store of fixed-size segments on local disk, then the
//!   source behind the storage model; policies `none`, `lru` and `group`):
//!   `patio mount cache`.
//! * `fusekit` — what the passthrough and the container mount share: the inode
//!   table, errno mapping, attributes, the owner and setgid rule for new entries,
//!   handle and listing tables, `statfs`.
//! * [`live`] — live statistics: a running mount rewrites a small stats file in a
//!   per-user runtime directory every second (`patio mount stat`).
//! * [`session`] — the mount lifecycle shared by every mount: checks of the source
//!   directory and the mount point, mounting, waiting for SIGINT/SIGTERM/SIGHUP or an
//!   external `fusermount3 -u`, and unmounting (lazily, on a second signal, when the
//!   mount point is busy).
//!
//! Dependencies point one way: patio-fs uses patio-core, patio-prefetch,
//! patio-container and patio-cache; the CLI uses patio-fs.

use std::fs;
use std::path::{Path, PathBuf};

pub mod container;
mod fusekit;
pub mod live;
pub mod passthrough;
pub mod prefetch;
pub mod segcache;
pub mod session;
pub mod tracing;

/// Errors of the mounts: bad inputs are refused before anything is mounted.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A bad argument (missing source, unusable mount point, …): the message says which.
    #[error("{0}")]
    Invalid(String),
    /// A system call failed: what was being done, and the OS error.
    #[error("{what}: {error}")]
    Io {
        what: String,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: std::io::Error,
    },
    /// Encoding or writing the trace failed.
    #[error("{0}")]
    Core(#[from] patio_core::CoreError),
}

impl From<patio_cache::CacheError> for FsError {
    fn from(e: patio_cache::CacheError) -> Self {
        match e {
            patio_cache::CacheError::Invalid(why) => FsError::Invalid(why),
            patio_cache::CacheError::Io { what, error } => FsError::Io { what, error },
        }
    }
}

impl FsError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        FsError::Io {
            what: what.into(),
            error: source,
        }
    }
}

pub type Result<T> = std::result::Result<T, FsError>;

/// A path as shown in messages.
pub(crate) fn shown(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Checks before mounting that a file the mount writes when it ends (`what`, named by
/// option `flag`) can be written at `out`: its directory exists, is outside the mount
/// point, and accepts the file. Nothing is left behind.
pub fn check_output(out: &Path, mountpoint: &Path, flag: &str, what: &str) -> Result<()> {
    if out.file_name().is_none() {
        return Err(FsError::Invalid(format!(
            "{flag} {}: not a file name",
            shown(out)
        )));
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = fs::canonicalize(&parent).map_err(|e| {
        FsError::io(
            format!(
                "cannot write {what} {}: directory {}",
                shown(out),
                shown(&parent)
            ),
            e,
        )
    })?;
    if dir.starts_with(mountpoint) {
        return Err(FsError::Invalid(format!(
            "{what} {} would be written inside the mount point {}",
            shown(out),
            shown(mountpoint)
        )));
    }
    if out.is_dir() {
        return Err(FsError::Invalid(format!(
            "{what} {} is a directory",
            shown(out)
        )));
    }
    let existed = out.exists();
    fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(out)
        .map_err(|e| FsError::io(format!("cannot write {what} {}", shown(out)), e))?;
    if !existed {
        let _ = fs::remove_file(out);
    }
    Ok(())
}
