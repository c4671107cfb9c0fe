//! patio-container: a pattern-indexed, log-structured container for N-1 writes (the
//! first consumer of the pattern engine; pattern PLFS).
//!
//! Many processes write one logical file; each appends to its own data log and
//! index log and never waits on another. Readers merge every index into one global
//! map of pattern entries and serve reads through it.
//!
//! | module | role |
//! |---|---|
//! | [`layout`] | the directory layout, marker, writer names, meta files, truncations |
//! | [`record`] | index records in `pattern` or `raw` mode |
//! | [`writer`] | the [`Writer`]: data appends, index buffering, flush, crash safety |
//! | [`segments`] | one writer's records as strided segments and loose writes |
//! | [`global`] | the merge of all writers into one [`GlobalIndex`] (tiles + pattern map) |
//! | [`reader`] | the [`Reader`]: parallel index load, `read_at`, split loads for MPI |
//! | `delta` | what a refresh applies over a reader's merged index, in memory |
//! | [`tools`] | `stat` without an index read, truncate, remove, check, flatten |
//! | [`compact`] | compaction: ended writers' live data into one log set, crash-safely |
//!
//! Dependencies point one way: patio-container uses patio-core; the CLI, the FUSE
//! mount and the Python bindings use patio-container.

pub mod compact;
mod delta;
pub mod error;
pub mod global;
pub mod layout;
pub mod reader;
pub mod record;
pub mod segments;
pub mod tools;
pub mod writer;

pub use compact::{compact, compact_planned, plan, Compacted, Plan, Thresholds};
pub use error::{ContainerError, Result};
pub use global::{GlobalIndex, IndexStats};
pub use layout::{Damage, IndexMode, WriterMeta};
pub use reader::{pack_logs, read_logs, unpack_logs, ContainerStats, LogBytes, Reader};
pub use tools::{check, flatten, remove, stat, truncate, CheckReport, Flattened, QuickStat};
pub use writer::{index_log_bytes, Appended, Writer, DEFAULT_INDEX_BUFFER};
