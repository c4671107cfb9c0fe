//! A chosen plan as the reads that carry it out, for a caller with no other view of
//! the replicas (the C ABI: the VOL connector, the MPI-IO layer): the *buffer* the
//! request fills, and per part of the plan a [`Piece`] — which copy to read, the
//! selection in that copy's index space, and where its elements land in the buffer.
//!
//! The buffer of a product request (a hyperslab, h5py fancy indexing: one grid after
//! [`priced_form`](crate::axes::priced_form)) has the grid's per-axis lengths as its
//! shape, row-major; the buffer of points or of an irregular union of grids is 1-D, in
//! the request's element order. A piece's source elements, read in the copy's order
//! (row-major over its grid, list order for points), fill the destination's elements
//! iterated with buffer axis `order[0]` outermost and `order[r-1]` innermost: the
//! identity unless the copy stores the axes permuted (a transposed or permuted
//! concatenated replica, whose axis `i` is the buffer's axis `order[i]`).
//!
//! Destinations are derived from the parts the decision priced (never by re-running a
//! plan's own rules), so every plan kind the decision makes has its pieces.

use crate::axes::{at_positions, positions};
use crate::decide::{split_points, Candidate, Decider, Holds, Plan};
use crate::error::{LayoutError, Result};
use crate::selection::{Axis, Grid, Selection};

/// One read of a plan: copy (`None` = the original, else a replica index), the
/// selection in the copy, the elements it fills in the buffer, and the axis order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub copy: Option<usize>,
    pub source: Selection,
    pub dest: Selection,
    pub order: Vec<usize>,
}

/// The buffer a request fills and the pieces of its plan.
#[derive(Clone, Debug)]
pub struct Pieces {
    pub buffer: Vec<u64>,
    pub pieces: Vec<Piece>,
}

fn line(n: u64) -> Selection {
    Selection::grid(Grid {
        axes: vec![Axis {
            blocks: if n > 0 { vec![(0, n)] } else { Vec::new() },
        }],
    })
}

fn identity(r: usize) -> Vec<usize> {
    (0..r).collect()
}

fn internal(what: &str) -> LayoutError {
    LayoutError::Selection(format!("plan does not match its request: {what}"))
}

impl Decider {
    /// The pieces of `cand` (a candidate of [`Decider::candidates`] or the choice of
    /// [`Decider::choose`] for `sel`).
    pub fn pieces(&self, sel: &Selection, cand: &Candidate) -> Result<Pieces> {
        let (request, axes) = self.request_form(sel)?;
        let n = request.nelements();
        if n == 0 {
            let buffer = axes.map_or(vec![0], |a| a.iter().map(Axis::len).collect());
            return Ok(Pieces {
                buffer,
                pieces: Vec::new(),
            });
        }
        let Some(axes) = axes else {
            return self.flat_pieces(&request, cand, n);
        };
        let buffer: Vec<u64> = axes.iter().map(Axis::len).collect();
        let d = axes.len();
        let mut pieces = Vec::with_capacity(cand.parts.len());
        for (copy, source) in &cand.parts {
            let Selection::Grids(gs) = source else {
                return Err(internal("a point part of a product request"));
            };
            let Some(g) = gs.first().filter(|_| gs.len() == 1) else {
                return Err(internal("a part of several grids"));
            };
            // The part in the original's index space, and the copy's axis order.
            let (orig, order): (Vec<Axis>, Vec<usize>) =
                match copy.map(|i| &self.replicas()[i].holds) {
                    None | Some(Holds::Everything) => (g.axes.clone(), identity(d)),
                    Some(Holds::Transposed { perm }) => (unpermute(&g.axes, perm), perm.clone()),
                    Some(Holds::Product { sets, perm }) => {
                        let at = unpermute(&g.axes, perm);
                        let idx = at
                            .iter()
                            .zip(sets)
                            .map(|(p, s)| at_positions(p, s))
                            .collect();
                        (idx, perm.clone())
                    }
                    Some(Holds::Points { .. }) => return Err(internal("a point replica")),
                };
            let dest = Grid {
                axes: orig
                    .iter()
                    .zip(&axes)
                    .map(|(o, a)| positions(o, a))
                    .collect(),
            };
            pieces.push(Piece {
                copy: *copy,
                source: source.clone(),
                dest: Selection::grid(dest),
                order,
            });
        }
        Ok(Pieces { buffer, pieces })
    }

    /// Points and irregular unions: a 1-D buffer in request order.
    fn flat_pieces(&self, request: &Selection, cand: &Candidate, n: u64) -> Result<Pieces> {
        let buffer = vec![n];
        let Plan::Points { replica, .. } = cand.plan else {
            let [(copy, source)] = cand.parts.as_slice() else {
                return Err(internal("several parts without a split plan"));
            };
            let piece = Piece {
                copy: *copy,
                source: source.clone(),
                dest: line(n),
                order: vec![0],
            };
            return Ok(Pieces {
                buffer,
                pieces: vec![piece],
            });
        };
        let (Selection::Points { coords, .. }, Holds::Points { linear }) =
            (request, &self.replicas()[replica].holds)
        else {
            return Err(internal("a point plan of a grid request"));
        };
        let (held, rest) = split_points(&self.original().shape, linear, coords);
        let point_list = |v: Vec<u64>| Selection::Points { rank: 1, coords: v };
        let mut pieces = Vec::with_capacity(2);
        for (copy, source) in &cand.parts {
            let dest: Vec<u64> = match copy {
                Some(_) => held.iter().map(|h| h.1 as u64).collect(),
                None => rest.iter().map(|&k| k as u64).collect(),
            };
            pieces.push(Piece {
                copy: *copy,
                source: source.clone(),
                dest: point_list(dest),
                order: vec![0],
            });
        }
        Ok(Pieces { buffer, pieces })
    }
}

/// Axes of a copy whose axis `i` is the original's `perm[i]`, in the original's order.
fn unpermute(axes: &[Axis], perm: &[usize]) -> Vec<Axis> {
    let mut out = vec![Axis { blocks: Vec::new() }; axes.len()];
    for (i, &a) in perm.iter().enumerate() {
        out[a] = axes[i].clone();
    }
    out
}
