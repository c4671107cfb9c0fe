//! patio-core: the pattern engine every other part of patio stands on.
//!
//! * [`unit`] — `PatternUnit` `[init, (d0…dk-1)^r]` with O(k) random access.
//! * [`detect`] — the sliding-window detector over deltas (Algorithm 1 of the
//!   pattern-PLFS paper), turning any `i64` sequence into units and literal runs.
//! * [`tree`] — nested patterns (kd-strided) and the `PatternSeq` that answers
//!   element and search queries over a whole sequence without expanding it.
//! * [`map`] — logical→physical pattern map with hole-aware lookups, and
//!   [`table`] — the sorted extent table that is its baseline and reference.
//! * [`codec`] — varints, checksums and framing shared by every on-disk format.
//! * [`blockset`] — the stream-set format: every stream's requests in entropy-coded
//!   blocks ([`entropy`]) of patterns ([`streamset`]), one-pattern units ([`unitform`])
//!   or records ([`records`]) behind
//!   a block index, for random access.
//! * [`trace`] — the trace model with its native and CSV formats, and
//!   [`capture`] — the raw per-process files of the LD_PRELOAD tracer.
//! * [`version`] — the file-version rule (has this file changed?) every cache,
//!   replica and plan of patio checks.
//!
//! The crate has no threads, no I/O beyond reading and writing trace files, and knows
//! nothing of FUSE, MPI, Python or the CLI.

pub mod analysis;
pub mod blockset;
pub mod capture;
pub mod codec;
pub mod detect;
pub mod entropy;
pub mod error;
pub mod literal;
pub mod map;
pub mod online;
pub mod persist;
pub mod predict;
pub mod ptrace;
pub mod records;
pub mod seqcodec;
pub mod setindex;
pub mod streamset;
pub mod table;

pub mod trace;
pub mod tree;
pub mod unit;
pub mod unitform;
pub mod version;

pub use detect::Detector;
pub use error::{CoreError, Result};
pub use map::{Extent, Lookup, PatternMap};
pub use table::ExtentTable;
pub use tree::{Body, Node, PatternSeq, Piece};
pub use unit::{PatternUnit, Shape};
pub use version::FileVersion;
