//! [`CacheError`]: why a cache cannot be opened. Faults of the store while serving are
//! not errors of the caller: they switch the cache off and reads go to SOURCE.

/// Why a cache (its configuration, its directory) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Budgets that cannot work, a directory in use, read-only or full, a table
    /// written by a newer patio: the message says which, in one line.
    #[error("{0}")]
    Invalid(String),
    /// A system call on the cache directory failed: what was being done, and the OS
    /// error.
    #[error("{what}: {error}")]
    Io {
        what: String,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: std::io::Error,
    },
}

impl CacheError {
    pub(crate) fn io(what: impl Into<String>, error: std::io::Error) -> Self {
        CacheError::Io {
            what: what.into(),
            error,
        }
    }
}

pub type Result<T> = std::result::Result<T, CacheError>;
