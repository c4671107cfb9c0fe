//! patio-reorg: pattern-aware file reorganization. A trace of a program that reads
//! (or writes) a file again and again with the same non-contiguous pattern becomes a
//! plan — one physical order for the file in which each valuable pattern's bytes are
//! contiguous — and the plan becomes a patio container: one data log in that order,
//! indexed by pattern records, so that the container's pattern map is the remap from
//! old offsets to new ones (pattern-sized, not one entry per piece). The container
//! serves the original logical file to every front end (library, FUSE mount, MPI).
//!
//! | module | role |
//! |---|---|
//! | [`select`] | the streams of one file and module in a trace, per process |
//! | [`plan`] | footprints, patterns, overlaps, the physical order, modelled gain |
//! | [`remap`] | the mapping of an order, physical runs, storage-model requests |
//! | [`apply`] | writing the container crash-safely |
//! | [`intervals`] | claimed byte ranges |
//! | [`registry`] | the registration of a container for its source (`.NAME.patio-reorg`) and the one rule deciding whether it is served |
//! | [`verify`] | checking that an existing container serves a source before registering it |
//! | [`capi`] | the C ABI, `include/patio_reorg.h` (`libpatio_reorg.so`): open a source, read its extents through the registered container |
//!
//! Costs come from the striped storage model of `patio_storage::striped`, shared
//! with the other reorganizations.

pub mod apply;
pub mod capi;
pub mod error;
pub mod intervals;
pub mod plan;
pub mod registry;
pub mod remap;
pub mod select;
pub mod verify;

pub use apply::{apply, Applied};
pub use error::{ReorgError, Result};
pub use plan::{plan, FileIdentity, PatternPlan, Plan, PlanOptions, Unplanned};
pub use registry::{Registration, Resolved, Status};
pub use remap::Layout;
pub use select::{Process, SelectOptions, Selection};
