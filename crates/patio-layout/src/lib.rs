//! patio-layout: the HDF5 layout core. For one read of a stored array it answers, in
//! microseconds, which bytes each copy (the original, a replica) would touch and what
//! that costs on the striped storage model — the decision `patio.h5`, `patio layout`,
//! the VOL connector and the MPI-IO layer all make through this crate.
//!
//! | module | role |
//! |---|---|
//! | [`selection`] | grids (hyperslabs, products of index sets) and point lists |
//! | [`layout`] | contiguous and chunked storage, filtered chunks with stored sizes |
//! | [`flatten`] | selection x layout -> byte extents, in closed form per run |
//! | [`price`] | eq 3.1 with a decompression term over `patio-storage`'s model |
//! | [`capi`] | the C ABI (`include/patio_layout.h`) for the VOL connector and the MPI-IO layer |
//! | [`capi_kb`] | the C ABI of recording reads into a knowledge base's record log |
//! | [`kblog`] | knowledge base location, a read's selection as recorded, record logs |
//! | [`capi_plan`] | the C ABI of a chosen plan: its pieces, their selections and extents |
//! | [`kbserve`] | a dataset's current replicas from its knowledge base, for serving reads |
//! | [`capi_serve`] | the C ABI of serving reads from replicas (the VOL connector) |
//! | [`axes`] | set algebra on per-axis block lists (containment, positions) |
//! | [`decide`] | the candidates for one read, their prices, the choice and its memo |
//! | [`pieces`] | a chosen plan as (copy, source selection, buffer destination) reads |
//! | [`error`] | [`LayoutError`] |

pub mod axes;
pub mod capi;
pub mod capi_kb;
pub mod capi_plan;
pub mod capi_serve;
pub mod decide;
pub mod error;
pub mod flatten;
pub mod kblog;
pub mod kbserve;
pub mod layout;
pub mod pieces;
pub mod price;
pub mod selection;

pub use decide::{Candidate, Decider, Holds, Plan, Replica};
pub use error::{LayoutError, Result};
pub use flatten::{flatten, flatten_pages, merge_sorted, Flat};
pub use layout::Layout;
pub use pieces::{Piece, Pieces};
pub use price::{price, price_selection, Constants};
pub use selection::{Axis, Grid, Selection};
