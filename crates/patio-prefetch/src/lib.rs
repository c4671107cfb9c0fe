//! patio-prefetch: pattern-aware prefetching (issue 4). Policies predict the next
//! reads of a stream; an engine with worker threads fills one byte-budgeted cache
//! from their predictions; a slow-store model gives the backing file a parallel file
//! system's latency; a replayer drives recorded or synthetic read streams through it
//! all and reports what each policy gained.
//!
//! | module | role |
//! |---|---|
//! | [`policy`] | the [`Policy`] trait and `none`, `readahead`, `stride`, `pattern`, `oracle` |
//! | [`pattern`] | the `pattern` policy: online analyzer, readahead windows ([`window`]) and learned lengths ([`lengths`]) |
//! | [`markov`] | the Markov baseline (Oly & Reed), trainable and saved |
//! | [`cache`] | prefetched ranges under one global byte budget; LRU; waste accounting |
//! | [`backend`] | the slow store: `latency + bytes/bandwidth`, bounded concurrency, jitter, `O_DIRECT` |
//! | [`striped`] | re-export of `patio-storage`'s striped storage model (targets, stripes, RPCs, seek classes; simulator; eq 3.1/4.1 counts) |
//! | [`engine`] | worker threads, per-stream readers, adaptive depth, counters |
//! | [`replay`] | trace-driven replay with compute gaps |
//! | [`capi`] | the C ABI (`include/patio_prefetch.h`, `libpatio_prefetch.so`) |
//! | [`process`] | the process's one engine for in-process front ends (Python, the C ABI) |
//! | [`model`] | saved models and model files: which policy a model is for, the one-stream rule, crash-safe writing |
//! | [`error`] | [`PrefetchError`], the crate's typed error |
//! | [`workloads`] | synthetic read workloads of `patio bench prefetch` |
//!
//! Front ends (the `patio replay`, `patio bench prefetch` and `patio mount prefetch`
//! commands, and Python's `patio.open`) open files with [`Engine::add_file`] and read
//! through a [`StreamReader`] per open file or stream.

pub mod backend;
pub mod cache;
pub mod capi;
pub mod engine;
pub mod error;
pub mod lengths;
pub mod markov;
pub mod model;
pub mod pattern;
pub mod policy;
pub mod process;
pub mod replay;
pub mod window;
pub mod workloads;

/// The striped storage model and its seeded generator live in `patio-storage`, shared
/// by prefetch, reorg, layout, AMR and the cache mount; re-exported here for the
/// prefetch engine's users.
pub use patio_storage::{rng, striped};

pub use backend::{AlignedBuf, DataFile, IoMode, SlowStore, StoreConfig, DIRECT_ALIGN};
pub use engine::{Engine, EngineConfig, FileHandle, Stats, StreamReader};
pub use error::PrefetchError;
pub use markov::Markov;
pub use policy::{Hint, Policy, PolicyKind};
pub use replay::{replay, Compute, ReplayConfig, Report, Request};
pub use striped::{
    JumpCounts, PageCounts, Piece, SeekClass, SeekCounts, SimReport, Striping, StripingError,
};
