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
//! * [`session`] — the mount lifecycle shared by every mount: checks of the source
//!   directory and the mount point, mounting, waiting for SIGINT/SIGTERM/SIGHUP or an
//!   external `fusermount3 -u`, and unmounting (lazily, on a second signal, when the
//!   mount point is busy).
//!
//! Dependencies point one way: patio-fs uses patio-core; the CLI uses patio-fs.

pub mod passthrough;
pub mod session;
pub mod tracing;

/// Errors of the mounts: bad inputs are refused before anything is mounted.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A bad argument (missing source, unusable mount point, …): the message says which.
    #[error("{0}")]
    Invalid(String),
    /// A system call failed: what was being done, and the OS error.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Encoding or writing the trace failed.
    #[error("{0}")]
    Core(#[from] patio_core::CoreError),
}

impl FsError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        FsError::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, FsError>;

/// A path as shown in messages.
pub(crate) fn shown(p: &std::path::Path) -> String {
    p.display().to_string()
}
