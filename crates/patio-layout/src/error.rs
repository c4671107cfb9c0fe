//! The layout core's typed error: every bad input (a selection outside its array, a
//! chunk index that does not match its grid, a wrong rank) is one of these, with a
//! message naming what was wrong; the Python binding maps it to `ValueError` and the
//! C ABI to an error code plus the message.

/// What the layout core could not do, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The selection does not fit the array (rank, bounds, a zero stride).
    #[error("selection: {0}")]
    Selection(String),
    /// The layout description is inconsistent (chunk shape, index length, sizes).
    #[error("layout: {0}")]
    Layout(String),
    /// The storage model rejected the extents or its parameters.
    #[error("storage model: {0}")]
    Storage(String),
}

pub type Result<T> = std::result::Result<T, LayoutError>;
