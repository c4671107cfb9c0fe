//! Flattening: a selection under a layout -> the byte extents a read of it touches.
//!
//! Unfiltered storage: per grid, the trailing axes whose selection is exactly one
//! whole, aligned chunk side (for contiguous storage: the whole axis) fold into the run
//! length; the last other axis `k` contributes its blocks cut at chunk boundaries
//! (*pieces*), every axis before it its single indices. Enumerating (outer indices,
//! pieces) row-major is buffer order, so a grid costs `O(runs)` — never `O(elements)`
//! — and consecutive runs (chunks written back to back) are merged as they are
//! produced. Points cost `O(points)`.
//!
//! Filtered storage, and unfiltered chunks that fit the reader's chunk cache (HDF5
//! reads those whole into its cache): a selection touches whole stored chunks — per
//! grid the product of the chunk coordinates its axes touch, each chunk once, in
//! first-touch order; [`Flat::inflated`] counts the bytes decompressed (filtered only).
//!
//! [`merge_sorted`] gives the offset-sorted, merged extents a cost model counts.

use crate::error::{LayoutError, Result};
use crate::layout::{row_major_strides, Layout};
use crate::selection::{Grid, Selection};
use std::collections::HashSet;

/// The extents one read touches, and the bytes it decompresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flat {
    /// `(offset, length)` in buffer order (chunks read in part) or chunk first-touch
    /// order (chunks read whole), consecutive extents merged.
    pub extents: Vec<(u64, u64)>,
    /// Decompressed bytes (filtered chunks read whole; 0 for unfiltered storage).
    pub inflated: u64,
}

/// Appends extents, merging one into its predecessor when it starts where that one
/// ended — or, with a page size, when it starts at or after the predecessor's start and
/// on the page the predecessor ends on or the next one (the union covers exactly the
/// pages the two cover, so page and page-run counts do not change).
#[derive(Default)]
struct Runs {
    v: Vec<(u64, u64)>,
    page: Option<u64>,
}

impl Runs {
    #[inline]
    fn push(&mut self, off: u64, len: u64) {
        if let Some(last) = self.v.last_mut() {
            let end = last.0 + last.1;
            match self.page {
                None if end == off => {
                    last.1 += len;
                    return;
                }
                Some(p) if off >= last.0 && off / p <= (end.max(1) - 1) / p + 1 => {
                    last.1 = end.max(off + len) - last.0;
                    return;
                }
                _ => {}
            }
        }
        self.v.push((off, len));
    }
}

/// The extents of `sel` under `layout` (see the module comment for the order).
pub fn flatten(layout: &Layout, sel: &Selection) -> Result<Flat> {
    flatten_with(layout, sel, None)
}

/// The pages `sel` touches under `layout`, as extents that cover exactly those pages
/// of `page` bytes (neighbouring extents on the same or adjacent pages joined): what
/// eq 3.1 counts, in far fewer extents than [`flatten`] gives for scattered elements.
pub fn flatten_pages(layout: &Layout, sel: &Selection, page: u64) -> Result<Flat> {
    flatten_with(layout, sel, Some(page.max(1)))
}

fn flatten_with(layout: &Layout, sel: &Selection, page: Option<u64>) -> Result<Flat> {
    sel.check(&layout.shape)?;
    if layout.whole_chunks() {
        return Ok(whole_chunks(layout, sel));
    }
    let mut runs = Runs {
        v: Vec::new(),
        page,
    };
    if layout.rank() == 0 {
        if let Some(a) = layout.addresses[0] {
            for _ in 0..sel.nelements() {
                runs.push(a, layout.itemsize);
            }
        }
        return Ok(Flat {
            extents: runs.v,
            inflated: 0,
        });
    }
    match sel {
        Selection::Grids(gs) => {
            let geo = Geometry::of(layout);
            for g in gs.iter().filter(|g| !g.is_empty()) {
                grid_runs(layout, &geo, g, page, &mut runs);
            }
        }
        Selection::Points { coords, .. } => {
            let geo = Geometry::of(layout);
            for p in coords.chunks(layout.rank()) {
                if let Some(a) = point_address(layout, &geo, p) {
                    runs.push(a, layout.itemsize);
                }
            }
        }
    }
    Ok(Flat {
        extents: runs.v,
        inflated: 0,
    })
}

/// Strides of the chunk grid and inside one chunk.
struct Geometry {
    grid_strides: Vec<u64>,
    chunk_strides: Vec<u64>,
}

impl Geometry {
    fn of(layout: &Layout) -> Geometry {
        Geometry {
            grid_strides: row_major_strides(&layout.grid()),
            chunk_strides: row_major_strides(&layout.chunk),
        }
    }
}

fn point_address(layout: &Layout, geo: &Geometry, p: &[u64]) -> Option<u64> {
    let (mut chunk_lin, mut local) = (0u64, 0u64);
    for (j, &x) in p.iter().enumerate() {
        let c = x / layout.chunk[j];
        chunk_lin += c * geo.grid_strides[j];
        local += (x - c * layout.chunk[j]) * geo.chunk_strides[j];
    }
    layout.addresses[chunk_lin as usize].map(|a| a + local * layout.itemsize)
}

/// Contributions of one selected index (or piece) to the chunk's linear index and to
/// the byte offset inside its chunk.
#[derive(Clone, Copy)]
struct Step {
    chunk: u64,
    local: u64,
}

/// Pieces longer than this many combinations are not lifted (see [`lift`]).
const LIFT_LIMIT: usize = 1 << 16;

fn grid_runs(layout: &Layout, geo: &Geometry, g: &Grid, page: Option<u64>, runs: &mut Runs) {
    let d = layout.rank();
    let chunk = &layout.chunk;
    let item = layout.itemsize;
    let whole = |j: usize| -> bool {
        let b = &g.axes[j].blocks;
        b.len() == 1 && b[0].1 == chunk[j] && b[0].0.is_multiple_of(chunk[j])
    };
    let k = (0..d).rev().find(|&j| !whole(j)).unwrap_or(0);
    let inner: u64 = chunk[k + 1..].iter().product();
    let mut tail = 0u64;
    for (j, a) in g.axes.iter().enumerate().skip(k + 1) {
        tail += (a.blocks[0].0 / chunk[j]) * geo.grid_strides[j];
    }
    // Axes before k: every selected index.
    let mut outer: Vec<Vec<Step>> = (0..k)
        .map(|j| {
            let (cs, gs, ls) = (chunk[j], geo.grid_strides[j], geo.chunk_strides[j] * item);
            let mut v = Vec::with_capacity(g.axes[j].len() as usize);
            for &(s, n) in &g.axes[j].blocks {
                for i in s..s + n {
                    let c = i / cs;
                    v.push(Step {
                        chunk: c * gs,
                        local: (i - c * cs) * ls,
                    });
                }
            }
            v
        })
        .collect();
    // Axis k: blocks cut at chunk boundaries.
    let (cs, gs, ls) = (chunk[k], geo.grid_strides[k], geo.chunk_strides[k] * item);
    let mut pieces: Vec<(Step, u64)> = Vec::new();
    for &(s, n) in &g.axes[k].blocks {
        let mut lo = s;
        let end = s + n;
        while lo < end {
            let c = lo / cs;
            let hi = end.min((c + 1) * cs);
            pieces.push((
                Step {
                    chunk: c * gs + tail,
                    local: (lo - c * cs) * ls,
                },
                (hi - lo) * inner * item,
            ));
            lo = hi;
        }
    }
    if let Some(p) = page {
        pieces = join_within_page(pieces, p);
        while let Some(last) = outer.last() {
            if last.len().saturating_mul(pieces.len()) > LIFT_LIMIT {
                break;
            }
            pieces = lift(last, &pieces, p);
            outer.pop();
        }
    }
    let addresses = &layout.addresses;
    let mut emit = |base: Step| {
        for &(p, len) in &pieces {
            if let Some(a) = addresses[(base.chunk + p.chunk) as usize] {
                runs.push(a + base.local + p.local, len);
            }
        }
    };
    odometer(&outer, Step { chunk: 0, local: 0 }, &mut emit);
}

/// Joins consecutive pieces in one chunk whose gap is shorter than a page: whatever
/// the chunk's address, no page lies wholly in such a gap, so the pages touched (and
/// their runs) do not change.
fn join_within_page(pieces: Vec<(Step, u64)>, page: u64) -> Vec<(Step, u64)> {
    let mut out: Vec<(Step, u64)> = Vec::with_capacity(pieces.len());
    for (s, len) in pieces {
        if let Some((last, last_len)) = out.last_mut() {
            let end = last.local + *last_len;
            if last.chunk == s.chunk && s.local >= end && s.local - end < page {
                *last_len = s.local + len - last.local;
                continue;
            }
        }
        out.push((s, len));
    }
    out
}

/// Pricing only: folds the innermost outer axis into the pieces (every index of it
/// combined with every piece, in buffer order), joining within pages, so a strided or
/// fancy selection whose elements crowd the same pages is priced in far fewer steps
/// than it has runs.
fn lift(axis: &[Step], pieces: &[(Step, u64)], page: u64) -> Vec<(Step, u64)> {
    let combined = axis.iter().flat_map(|a| {
        pieces.iter().map(move |&(p, len)| {
            (
                Step {
                    chunk: a.chunk + p.chunk,
                    local: a.local + p.local,
                },
                len,
            )
        })
    });
    join_within_page(combined.collect(), page)
}

/// Calls `emit` with the summed steps of every combination of `axes`, row-major.
fn odometer(axes: &[Vec<Step>], acc: Step, emit: &mut dyn FnMut(Step)) {
    match axes.split_first() {
        None => emit(acc),
        Some((first, rest)) => {
            for s in first {
                odometer(
                    rest,
                    Step {
                        chunk: acc.chunk + s.chunk,
                        local: acc.local + s.local,
                    },
                    emit,
                );
            }
        }
    }
}

fn whole_chunks(layout: &Layout, sel: &Selection) -> Flat {
    let stored = layout.stored.as_deref();
    let geo = Geometry::of(layout);
    let mut seen: HashSet<u64> = HashSet::new();
    let mut order: Vec<u64> = Vec::new();
    let mut touch = |c: u64| {
        if seen.insert(c) {
            order.push(c);
        }
    };
    match sel {
        Selection::Grids(gs) => {
            for g in gs.iter().filter(|g| !g.is_empty()) {
                let per_axis: Vec<Vec<Step>> = g
                    .axes
                    .iter()
                    .enumerate()
                    .map(|(j, a)| {
                        let mut cs: Vec<Step> = Vec::new();
                        for &(s, n) in &a.blocks {
                            for c in s / layout.chunk[j]..=(s + n - 1) / layout.chunk[j] {
                                let step = Step {
                                    chunk: c * geo.grid_strides[j],
                                    local: 0,
                                };
                                if cs.last().is_none_or(|l| l.chunk != step.chunk) {
                                    cs.push(step);
                                }
                            }
                        }
                        cs
                    })
                    .collect();
                odometer(&per_axis, Step { chunk: 0, local: 0 }, &mut |s| {
                    touch(s.chunk)
                });
            }
        }
        Selection::Points { coords, .. } => {
            for p in coords.chunks(layout.rank().max(1)) {
                let c: u64 = (0..p.len())
                    .map(|j| (p[j] / layout.chunk[j]) * geo.grid_strides[j])
                    .sum();
                touch(c);
            }
        }
    }
    let mut out = Flat::default();
    let mut runs = Runs::default();
    for c in order {
        if let Some(a) = layout.addresses[c as usize] {
            match stored {
                Some(sizes) => {
                    runs.push(a, sizes[c as usize]);
                    out.inflated += layout.chunk_bytes();
                }
                None => runs.push(a, layout.chunk_bytes()),
            }
        }
    }
    out.extents = runs.v;
    out
}

/// `extents` sorted by offset with overlapping and adjacent extents merged (empty ones
/// dropped): the set of bytes a read must fetch.
pub fn merge_sorted(extents: &[(u64, u64)]) -> Result<Vec<(u64, u64)>> {
    let mut v: Vec<(u64, u64)> = extents.iter().copied().filter(|e| e.1 > 0).collect();
    for &(o, n) in &v {
        if o.checked_add(n).is_none() {
            return Err(LayoutError::Layout(format!(
                "extent at {o} of {n} bytes ends past 2^64"
            )));
        }
    }
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (o, n) in v {
        match out.last_mut() {
            Some(last) if o <= last.0 + last.1 => {
                last.1 = last.1.max(o + n - last.0);
            }
            _ => out.push((o, n)),
        }
    }
    Ok(out)
}
