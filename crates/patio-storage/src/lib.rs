//! patio-storage: the striped storage model every reorganization cost model and
//! benchmark prices against — prefetch's slow store, `reorg plan`, the HDF5 layout
//! core, the AMR orders and the cache mount — defined once, below all of them.
//!
//! | module | role |
//! |---|---|
//! | [`striped`] | targets, stripes, RPCs, seek classes; discrete-event simulator; eq 3.1/4.1 counts |
//! | [`overrides`] | `--store-targets`/`--store-stripe-kib`: [`Striping::with_overrides`], the one rule for changing a preset |
//! | [`probe`] | `patio store probe`: the striped model's parameters measured on a real file system |
//! | [`probed`] | the saved probe of this machine, loaded as the preset `probed` |
//! | [`rng`] | the seeded generator of the simulator's jitter (and of synthetic workloads) |

pub mod overrides;
pub mod probe;
pub mod probed;
pub mod rng;
pub mod striped;

pub use striped::{
    JumpCounts, PageCounts, Piece, SeekClass, SeekCounts, SimReport, Striping, StripingError,
};
