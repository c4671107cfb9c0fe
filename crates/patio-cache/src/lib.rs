//! patio-cache: the segment-grouping cache. Reads go through a memory tier, then a
//! store of fixed-size segments on local disk, then SOURCE behind the storage model,
//! with the policies `none`, `lru` and `group` (items read one after the other, by
//! any caller, stored together in one segment and brought ahead together). No FUSE:
//! the cache mount (`patio-fs::segcache`) is one front end over it; in-process front
//! ends can open a cache the same way.
//!
//! | module | role |
//! |---|---|
//! | [`graph`] | successor graph (recent popularity, j of k), groups (SCCs split and packed) |
//! | [`stride`] | strided streams: their next periods as groups brought ahead |
//! | [`store`] | the slot file (preallocated, `O_DIRECT`) and the slot allocator |
//! | [`table`] | the persisted segment table (framed, checksummed, generation-numbered) |
//! | [`memtier`] | the memory tier: the LRU of demand items beside the items groups bring ahead |
//! | [`plain`] | the store's item region: an exact LRU of items in item-sized cells |
//! | [`share`] | the group share: the slots segments may hold, following what groups earn |
//! | `slots` | which slot the item region or a segment takes, and the share's bookkeeping |
//! | [`config`] | the policy and the budgets |
//! | `pay` | whether a file's groups earn their place |
//! | `worth` | whether a segment build or a read ahead saves SOURCE requests against an LRU of the whole store |
//! | [`core`] | the tiers, the policies, invalidation, what groups may cost |
//! | `fill` | the fill paths that touch the segment store |
//! | [`files`] | the source files served: registration, checks before reads, changes |
//! | [`dir`] | the cache directory: checks, lock, warm start, saves, idle work |
//! | [`stats`] | the counters |
//! | [`error`] | [`CacheError`] |
//!
//! Dependencies point one way: patio-cache uses patio-core and patio-prefetch (the
//! SOURCE reader behind the storage model, aligned buffers); front ends use it.

pub mod config;
pub mod core;
pub mod dir;
pub mod error;
pub mod files;
mod fill;
pub mod graph;
pub mod memtier;
mod pay;
pub mod plain;
pub mod share;
mod slots;
pub mod stats;
pub mod store;
pub mod stride;
pub mod table;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_support;
#[cfg(test)]
mod tests;
mod worth;

pub use crate::config::{CacheConfig, Policy};
pub use crate::core::{Cache, State};
pub use crate::dir::open_cache;
pub use crate::error::{CacheError, Result};
pub use crate::files::{Change, OpenFile};
pub use crate::graph::{Item, Popularity};
pub use crate::stats::CacheStats;
pub use crate::table::{Table, TableError};
