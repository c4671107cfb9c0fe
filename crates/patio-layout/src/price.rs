//! eq 3.1 (the thesis' page-level read cost, REORGANIZATION.md §A.4) over the striped
//! storage model, with a decompression term for filtered chunks:
//!
//! ```text
//! T_r = max over targets i of ( N_pg^i * T_pg + N_chk^i * T_chk ) + T_lat
//!       + max over clients of ( inflated bytes * T_dec )
//! ```
//!
//! `N_pg^i` and `N_chk^i` (distinct pages and runs of consecutive pages on target `i`)
//! come from [`patio_storage::Striping::page_counts`], summed over the clients that read
//! at the same time. A read that touches no page costs nothing.

use crate::axes::priced_form;
use crate::error::{LayoutError, Result};
use crate::flatten::{flatten_pages, Flat};
use crate::layout::Layout;
use crate::selection::Selection;
use patio_storage::Striping;
use std::borrow::Cow;

/// eq 3.1's constants in seconds: per page, per run, per read, per decompressed byte.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Constants {
    pub t_pg: f64,
    pub t_chk: f64,
    pub t_lat: f64,
    pub t_dec: f64,
}

/// Modelled seconds of the reads `clients` issue together.
pub fn price(model: &Striping, c: &Constants, clients: &[&Flat]) -> Result<f64> {
    let mut pages = vec![0u64; model.targets];
    let mut chunks = vec![0u64; model.targets];
    let mut inflate = 0f64;
    for f in clients {
        let counts = model
            .page_counts(&f.extents)
            .map_err(|e| LayoutError::Storage(e.to_string()))?;
        for t in 0..model.targets {
            pages[t] += counts.pages[t];
            chunks[t] += counts.chunks[t];
        }
        inflate = inflate.max(f.inflated as f64 * c.t_dec);
    }
    if pages.iter().all(|&p| p == 0) {
        return Ok(0.0);
    }
    let busiest = pages
        .iter()
        .zip(&chunks)
        .map(|(&p, &k)| p as f64 * c.t_pg + k as f64 * c.t_chk)
        .fold(0.0, f64::max);
    Ok(busiest + c.t_lat + inflate)
}

/// Modelled seconds of reading `sel` from `layout` alone (flattened at the model's
/// page size, so scattered elements cost what their pages cost to count).
pub fn price_selection(
    model: &Striping,
    c: &Constants,
    layout: &Layout,
    sel: &Selection,
) -> Result<f64> {
    // Only a union of grids can differ from its priced form (a single grid would only
    // be copied).
    let form = match sel {
        Selection::Grids(gs) if gs.len() > 1 => {
            sel.check(&layout.shape)?;
            priced_form(sel, layout.rank()).0
        }
        _ => Cow::Borrowed(sel),
    };
    let f = flatten_pages(layout, &form, model.page_size)?;
    price(model, c, &[&f])
}
