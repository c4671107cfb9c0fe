//! Typed errors of the container: every message names the container path or the
//! log file (and byte offset) it is about.

use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ContainerError {
    /// A bad argument or a path that is not what it should be (not a container, a
    /// container of an unknown version, an offset beyond 2^63).
    #[error("{0}")]
    Invalid(String),
    /// A system call on a container file failed.
    #[error("{path}: {error}")]
    Io {
        path: String,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: std::io::Error,
    },
    /// A file whose bytes do not decode (marker, meta or a damaged index record that
    /// cannot be skipped).
    #[error("{path}: corrupt at byte {offset}: {reason}")]
    Corrupt {
        path: String,
        offset: u64,
        reason: String,
    },
    /// An error of the pattern engine.
    #[error("{0}")]
    Core(#[from] patio_core::CoreError),
}

impl ContainerError {
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        ContainerError::Io {
            path: path.as_ref().display().to_string(),
            error: source,
        }
    }

    /// Attaches a file name to a decoding error of the engine.
    pub(crate) fn in_file(path: impl AsRef<Path>, e: patio_core::CoreError) -> Self {
        match e {
            patio_core::CoreError::Corrupt { offset, reason } => ContainerError::Corrupt {
                path: path.as_ref().display().to_string(),
                offset,
                reason,
            },
            other => ContainerError::Invalid(format!("{}: {other}", path.as_ref().display())),
        }
    }

    /// The OS error number for front ends that answer with errno (FUSE).
    pub fn errno(&self) -> i32 {
        match self {
            ContainerError::Io { error, .. } => error.raw_os_error().unwrap_or(libc::EIO),
            ContainerError::Invalid(_) => libc::EINVAL,
            _ => libc::EIO,
        }
    }
}

pub type Result<T> = std::result::Result<T, ContainerError>;
