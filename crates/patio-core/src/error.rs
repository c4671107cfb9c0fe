//! Typed errors of the pattern engine and its codecs.

use thiserror::Error;

/// Everything patio-core can fail with. Decoding errors carry the byte offset at
/// which the input stopped making sense so front ends can name it.
#[derive(Debug, Error)]
pub enum CoreError {
    /// A value or argument outside what the engine accepts.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Encoded bytes that do not decode: bad magic, unknown version, checksum
    /// mismatch, truncation.
    #[error("corrupt data at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// A malformed line in a text trace.
    #[error("{path}:{line}: {reason}")]
    Parse {
        path: String,
        line: u64,
        reason: String,
    },
    #[error("{path}: {error}")]
    Io {
        path: String,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: std::io::Error,
    },
}

impl CoreError {
    pub fn corrupt(offset: usize, reason: impl Into<String>) -> Self {
        CoreError::Corrupt {
            offset: offset as u64,
            reason: reason.into(),
        }
    }

    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        CoreError::Io {
            path: path.as_ref().display().to_string(),
            error: source,
        }
    }
}

pub type Result<T> = std::result::Result<T, CoreError>;
