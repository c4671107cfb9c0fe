//! Errors of planning and applying a reorganization: each names the file (and where it
//! matters the process and offset) so that a user can act on one line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReorgError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: std::io::Error,
    },
    /// The container's own message (its cause is not chained again: printed twice).
    #[error(transparent)]
    Container(#[from] patio_container::ContainerError),
    #[error("the trace has no requests for {file} (it names {names})")]
    FileNotInTrace { file: String, names: String },
    #[error("the trace has no {module} requests for {file} (modules: {present})")]
    ModuleNotInTrace {
        module: String,
        file: String,
        present: String,
    },
    #[error(
        "the trace does not match {file}: {process} {op}s {len} bytes at offset {offset}, past its end ({size} bytes)"
    )]
    PastEnd {
        file: String,
        process: String,
        op: &'static str,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("no recurring non-contiguous pattern for {file} in the trace ({why}); nothing to reorganize")]
    NoPattern { file: String, why: String },
    #[error("{path}: already exists; choose another output or remove it first")]
    OutputExists { path: PathBuf },
    #[error("{path}: changed while being reorganized ({what}); the partial output was removed")]
    SourceChanged { path: PathBuf, what: String },
    #[error("{path}: changed since the plan ({what}); plan again")]
    StalePlan { path: PathBuf, what: String },
    /// A registration file that cannot be trusted (corrupt, truncated, another format).
    #[error("{path}: not a valid reorganization registration: {reason}")]
    BadRegistration { path: PathBuf, reason: String },
    /// A container offered for registration that does not hold the source's bytes.
    #[error("{container}: does not serve {path} ({what}); not registered")]
    NotACopy {
        path: PathBuf,
        container: PathBuf,
        what: String,
    },
    #[error("storage model: {0}")]
    Model(String),
}

pub type Result<T> = std::result::Result<T, ReorgError>;

impl ReorgError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReorgError::Io {
            path: path.into(),
            error: source,
        }
    }
}
