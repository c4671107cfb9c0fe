//! The errors of patio-prefetch, typed: bad arguments (a policy that takes no model,
//! a model for another policy, a trace that does not fit its data), damaged model
//! bytes, OS errors with what was being done, and storage-model errors.

use crate::striped::StripingError;
use std::io;

/// An error of the prefetch engine's set-up, models or replay.
#[derive(Debug, thiserror::Error)]
pub enum PrefetchError {
    /// A bad argument or input; the message says which.
    #[error("{0}")]
    Invalid(String),
    /// A model of one policy given where another policy's model is expected.
    #[error("{what} is a {found} model, expected a {expected} model")]
    WrongModel {
        /// The model as named in messages (its file, or "the model").
        what: String,
        found: &'static str,
        expected: &'static str,
    },
    /// The engine served wrong data (found by a verifying replay).
    #[error("{0}")]
    Failed(String),
    /// Bytes that do not decode as what they should be.
    #[error("{what}: {error}")]
    Corrupt {
        what: String,
        error: patio_core::CoreError,
    },
    /// A system call failed: what was being done, and the OS error.
    #[error("{what}: {error}")]
    Io {
        what: String,
        /// Shown in the message, not as a separate cause (which would print it twice).
        error: io::Error,
    },
    /// The storage model refused its parameters or input.
    #[error(transparent)]
    Store(#[from] StripingError),
}

impl PrefetchError {
    pub(crate) fn io(what: impl Into<String>, error: io::Error) -> Self {
        PrefetchError::Io {
            what: what.into(),
            error,
        }
    }

    /// The same error with the model it is about named `what` (a file).
    pub fn named(self, what: &str) -> Self {
        match self {
            PrefetchError::WrongModel {
                found, expected, ..
            } => PrefetchError::WrongModel {
                what: what.to_string(),
                found,
                expected,
            },
            PrefetchError::Corrupt { what: w, error } => PrefetchError::Corrupt {
                what: format!("{what}: {w}"),
                error,
            },
            other => other,
        }
    }

    /// The OS error inside, if any (front ends keep its errno).
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            PrefetchError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Results of patio-prefetch.
pub type Result<T> = std::result::Result<T, PrefetchError>;
