//! The decision: every eligible way to serve one read of an array — the original,
//! always; each replica that holds the data; a split read taking part from a partial
//! replica and the rest from the original; several concatenated replicas combined —
//! each priced by eq 3.1 on its flattened extents, the cheapest chosen (the original on
//! ties), and remembered per selection.
//!
//! Eligibility (REORGANIZATION.md §A.4, with the partial-overlap gap closed where it
//! can be computed exactly):
//! * a full replica (re-chunked, Z-order, Hilbert) holds everything, in the array's
//!   own index space; a transposed one holds everything with its axes permuted and
//!   serves product selections and points;
//! * a concatenated replica of a product of per-axis index sets serves a product
//!   request inside its sets on every axis (read at the matching positions), and splits
//!   a request that leaves the sets along one axis only (its part plus the rest from
//!   the original);
//! * a concatenated replica of points serves the request's points it holds, and splits
//!   with the original when some are missing;
//! * several concatenated product replicas that each hold a product request on every
//!   axis but one are combined, greedily (the replica holding most of what is still
//!   missing first), with the original for what none holds.

use crate::axes::bits::IndexSet;
use crate::axes::{offsets, positions_from, priced_form, subtract};
use crate::error::{LayoutError, Result};
use crate::layout::Layout;
use crate::price::{price_selection, Constants};
use crate::selection::{Axis, Grid, Selection};
use patio_storage::Striping;
use std::collections::HashMap;

mod pages;
mod points;
use pages::lost_pages;
use points::PointsRequest;

/// What a replica holds, in terms of the original array.
#[derive(Clone, Debug)]
pub enum Holds {
    /// Every element, in the original's index space (re-chunked, curve orders).
    Everything,
    /// Every element of `np.transpose(original, perm)`.
    Transposed { perm: Vec<usize> },
    /// The product of `sets` (sorted index sets per axis), stored with axes `perm`.
    Product { sets: Vec<Axis>, perm: Vec<usize> },
    /// The elements at these sorted row-major linear indices, as a 1-D array.
    Points { linear: Vec<u64> },
}

/// A replica: its stored layout and what it holds.
#[derive(Clone, Debug)]
pub struct Replica {
    pub layout: Layout,
    pub holds: Holds,
}

/// How a candidate serves the read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Original,
    /// A full or transposed replica (index into the decider's replicas).
    Whole(usize),
    /// A concatenated product replica holding the whole request.
    Sub(usize),
    /// A concatenated product replica's part along `axis`, the rest from the original.
    Split {
        replica: usize,
        axis: usize,
    },
    /// A concatenated point replica (`rest`: the points it lacks from the original).
    Points {
        replica: usize,
        rest: bool,
    },
    /// Concatenated product replicas in greedy order along `axis` (`rest`: and the
    /// original for what none holds).
    Combined {
        replicas: Vec<usize>,
        axis: usize,
        rest: bool,
    },
}

/// One way to serve a read: the plan, its modelled seconds, and the parts priced
/// (`None` = the original, else a replica index, with the selection in that copy).
#[derive(Clone, Debug)]
pub struct Candidate {
    pub plan: Plan,
    pub seconds: f64,
    pub parts: Vec<(Option<usize>, Selection)>,
}

/// Decisions remembered per decider.
pub const MEMO: usize = 1024;

/// Chooses among the original and the replicas of one array.
pub struct Decider {
    original: Layout,
    replicas: Vec<Replica>,
    model: Striping,
    consts: Constants,
    memo: HashMap<Selection, (Candidate, f64)>,
    /// Each concatenated product replica's index sets prepared once; empty for other
    /// replicas.
    sets: Vec<Vec<Prepared>>,
    /// Per replica: every chunk allocated and unfiltered, so a read of `b` bytes from
    /// it touches at least `b / page` pages ([`Decider::floor`]).
    plain: Vec<bool>,
    /// The original's chunks all allocated and unfiltered, on a model whose stripes are
    /// whole pages: a non-empty read of it touches a page, and each file page it loses
    /// is one page of one target ([`Decider::cannot_win`]).
    counted: bool,
}

/// A concatenated product replica's index set along one axis, prepared for the
/// decision: in the form the set algebra works on (a bitmap on a short axis) and with
/// the position of each block's first index (for reading the replica at positions).
struct Prepared {
    set: IndexSet,
    before: Vec<u64>,
}

impl Decider {
    pub fn new(
        original: Layout,
        replicas: Vec<Replica>,
        model: Striping,
        consts: Constants,
    ) -> Result<Decider> {
        model
            .validate()
            .map_err(|e| LayoutError::Storage(e.to_string()))?;
        let d = original.rank();
        for (i, r) in replicas.iter().enumerate() {
            let ok = match &r.holds {
                Holds::Everything => r.layout.shape == original.shape,
                Holds::Transposed { perm } => {
                    is_perm(perm, d)
                        && perm.iter().map(|&a| original.shape[a]).eq(r
                            .layout
                            .shape
                            .iter()
                            .copied())
                }
                Holds::Product { sets, perm } => {
                    is_perm(perm, d)
                        && sets.len() == d
                        && sets.iter().zip(&original.shape).all(|(s, &n)| s.end() <= n)
                        && perm
                            .iter()
                            .map(|&a| sets[a].len())
                            .eq(r.layout.shape.iter().copied())
                }
                Holds::Points { linear } => {
                    linear.windows(2).all(|w| w[0] < w[1])
                        && linear
                            .last()
                            .is_none_or(|&l| l < original.shape.iter().product())
                        && r.layout.shape == [linear.len() as u64]
                }
            };
            if !ok {
                return Err(LayoutError::Layout(format!(
                    "replica {i} does not match what it claims to hold of an array {:?}",
                    original.shape
                )));
            }
        }
        let allocated = |l: &Layout| l.stored.is_none() && l.addresses.iter().all(Option::is_some);
        let plain = replicas.iter().map(|r| allocated(&r.layout)).collect();
        let counted = allocated(&original) && model.stripe_size.is_multiple_of(model.page_size);
        let sets = replicas
            .iter()
            .map(|r| match &r.holds {
                Holds::Product { sets, .. } => sets
                    .iter()
                    .zip(&original.shape)
                    .map(|(a, &n)| Prepared {
                        set: IndexSet::new(a, n),
                        before: offsets(a).0,
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        Ok(Decider {
            original,
            replicas,
            model,
            consts,
            memo: HashMap::new(),
            sets,
            plain,
            counted,
        })
    }

    /// Adds a replica (checked as in [`Decider::new`]; the memo starts again).
    pub fn add_replica(&mut self, r: Replica) -> Result<()> {
        let mut reps = self.replicas.clone();
        reps.push(r);
        *self = Decider::new(self.original.clone(), reps, self.model.clone(), self.consts)?;
        Ok(())
    }

    pub fn replicas(&self) -> &[Replica] {
        &self.replicas
    }

    /// Forgets the remembered decisions (the next choice of any selection is made anew).
    pub fn forget(&mut self) {
        self.memo.clear();
    }

    /// The original's layout.
    pub fn original(&self) -> &Layout {
        &self.original
    }

    fn layout(&self, part: Option<usize>) -> &Layout {
        part.map_or(&self.original, |i| &self.replicas[i].layout)
    }

    /// Prices a candidate made of `parts` read one after the other.
    fn candidate(&self, plan: Plan, parts: Vec<(Option<usize>, Selection)>) -> Result<Candidate> {
        let mut seconds = 0.0;
        for (src, sel) in &parts {
            seconds += price_selection(&self.model, &self.consts, self.layout(*src), sel)?;
        }
        Ok(Candidate {
            plan,
            seconds,
            parts,
        })
    }

    /// `sel` checked and in its priced form ([`priced_form`]), with its product axes.
    pub(crate) fn request_form(&self, sel: &Selection) -> Result<(Selection, Option<Vec<Axis>>)> {
        sel.check(&self.original.shape)?;
        let (form, axes) = priced_form(sel, self.original.rank());
        Ok((form.into_owned(), axes))
    }

    /// Every eligible candidate, the original first. The parts that read the request
    /// itself carry it in its priced form (see [`Decider::choose`]).
    pub fn candidates(&self, sel: &Selection) -> Result<Vec<Candidate>> {
        let (request, axes) = self.request_form(sel)?;
        self.candidates_of(&request, axes, false)
    }

    /// The candidates, the original first, then those of whole and point replicas, then
    /// those of product replicas, then a combination. With `prune`, a candidate that
    /// provably costs at least the cheapest one so far is left out before its most
    /// expensive part is priced (see [`Bound`]): the cheapest candidate is still found.
    fn candidates_of(
        &self,
        sel: &Selection,
        axes: Option<Vec<Axis>>,
        prune: bool,
    ) -> Result<Vec<Candidate>> {
        let mut out = vec![self.candidate(Plan::Original, vec![(None, sel.clone())])?];
        let original = out[0].seconds;
        // A point request's linear indices, made once for every point replica weighed.
        let points = match sel {
            Selection::Points { coords, .. }
                if self
                    .replicas
                    .iter()
                    .any(|r| matches!(r.holds, Holds::Points { .. })) =>
            {
                Some(PointsRequest::new(&self.original.shape, coords))
            }
            _ => None,
        };
        let bound = |out: &[Candidate]| {
            prune.then(|| Bound {
                original,
                best: out.iter().map(|c| c.seconds).fold(f64::INFINITY, f64::min),
            })
        };
        for (i, r) in self.replicas.iter().enumerate() {
            let c = match (&r.holds, &axes, sel) {
                (Holds::Everything, _, _) => {
                    Some(self.candidate(Plan::Whole(i), vec![(Some(i), sel.clone())])?)
                }
                (Holds::Transposed { perm }, Some(_), _)
                | (Holds::Transposed { perm }, None, Selection::Points { .. }) => {
                    Some(self.candidate(Plan::Whole(i), vec![(Some(i), permuted(sel, perm))])?)
                }
                (Holds::Points { linear }, _, Selection::Points { coords, .. }) => match &points {
                    Some(req) if req.may_overlap(linear) => {
                        self.concat_points(i, linear, coords, req, bound(&out))?
                    }
                    _ => None,
                },
                _ => None,
            };
            out.extend(c);
        }
        if let Some(a) = &axes {
            let req: Vec<IndexSet> = a
                .iter()
                .zip(&self.original.shape)
                .map(|(a, &n)| IndexSet::new(a, n))
                .collect();
            for (i, r) in self.replicas.iter().enumerate() {
                if let Holds::Product { sets, perm } = &r.holds {
                    let c = self.concat_product(i, sets, perm, a, &req, bound(&out))?;
                    out.extend(c);
                }
            }
            let c = self.combined(a, &req, bound(&out))?;
            out.extend(c);
        }
        Ok(out)
    }

    /// The parts of a candidate priced one after the other, stopping (None) as soon as
    /// the bound proves it cannot be the cheapest: after the replica parts (`held`, the
    /// part of the request they serve, in the original's index space) and before the
    /// rest read from the original.
    fn bounded(
        &self,
        plan: Plan,
        parts: Vec<(Option<usize>, Selection)>,
        held: impl FnOnce() -> Selection,
        bound: Option<Bound>,
    ) -> Result<Option<Candidate>> {
        let Some(b) = bound else {
            return self.candidate(plan, parts).map(Some);
        };
        let floor: f64 = parts
            .iter()
            .filter_map(|(src, sel)| src.map(|i| self.floor(i, sel.nelements())))
            .sum();
        if b.beaten(floor) {
            return Ok(None);
        }
        let has_rest = parts.iter().any(|p| p.0.is_none());
        let mut replica_parts = 0.0;
        for (src, sel) in parts.iter().filter(|p| p.0.is_some()) {
            replica_parts += price_selection(&self.model, &self.consts, self.layout(*src), sel)?;
        }
        if b.beaten(replica_parts) {
            return Ok(None);
        }
        if has_rest {
            let h = price_selection(&self.model, &self.consts, &self.original, &held())?;
            if b.beaten(replica_parts + (b.original - h).max(0.0)) {
                return Ok(None);
            }
        }
        let mut seconds = replica_parts;
        for (src, sel) in parts.iter().filter(|p| p.0.is_none()) {
            seconds += price_selection(&self.model, &self.consts, self.layout(*src), sel)?;
        }
        Ok(Some(Candidate {
            plan,
            seconds,
            parts,
        }))
    }

    /// A floor under eq 3.1 for reading `n` elements from replica `i`, without
    /// flattening them: on a replica whose chunks are all allocated and unfiltered, `b`
    /// distinct bytes lie on at least `ceil(b / page)` pages, the busiest of the targets
    /// holds at least its share of them and one run, and every read pays its latency.
    /// Zero otherwise (unallocated chunks cost nothing, filtered ones may be smaller).
    fn floor(&self, i: usize, n: u64) -> f64 {
        if !self.plain[i] || n == 0 {
            return 0.0;
        }
        let m = &self.model;
        let pages = (n.saturating_mul(self.replicas[i].layout.itemsize)).div_ceil(m.page_size);
        let busiest = pages.div_ceil(m.targets as u64);
        busiest as f64 * self.consts.t_pg + self.consts.t_chk + self.consts.t_lat
    }

    /// True when a candidate that reads replica parts with floor `floor`
    /// ([`Decider::floor`]) and, from the original, the product request `axes` with its
    /// set along `k` reduced to `kept` (`removed` taken out) provably costs at least the
    /// cheapest candidate so far — decided in `O(blocks of axis k)` plus, for a removed
    /// block at the request's edge, its groups ([`lost_pages`]), before any part is built.
    ///
    /// The rest `R` touches a subset of the request `Q`'s pages. When it loses none, it
    /// costs the original's price and the candidate never beats the original (ties go to
    /// the original). When it loses at most `n` (on the original counted exactly: every
    /// chunk allocated and unfiltered, stripes of whole pages), each lost page lowers
    /// one target's page count by one and its run count by at most one, so under eq 3.1
    /// `T(R) >= T(Q) - n (t_pg + t_chk)` (the latency stays: `R` touches a page), and
    /// the candidate costs at least `floor + T(Q) - n (t_pg + t_chk)`.
    fn cannot_win(
        &self,
        k: usize,
        axes: &[Axis],
        removed: &IndexSet,
        kept: &IndexSet,
        floor: f64,
        b: Bound,
    ) -> bool {
        let per = self.consts.t_pg + self.consts.t_chk;
        // The most pages the rest may lose with the candidate still provably beaten.
        let room = floor + b.original - b.best * (1.0 + 1e-9);
        let limit = if self.counted && room > 0.0 {
            (room / per) as u64
        } else {
            0
        };
        let page = self.model.page_size;
        match lost_pages(&self.original, page, axes, k, (removed, kept), limit) {
            Some(0) => true,
            Some(n) => b.beaten(floor + b.original - n as f64 * per),
            None => false,
        }
    }

    /// The elements of a product request `axes` whose set along `k` holds `n` indices.
    fn elements_with(axes: &[Axis], k: usize, n: u64) -> u64 {
        axes.iter()
            .enumerate()
            .filter(|&(j, _)| j != k)
            .fold(n, |acc, (_, a)| acc.saturating_mul(a.len()))
    }

    /// The cheapest candidate and its modelled saving over the original, remembered
    /// per selection (a product union under the one grid it equals: plans depend only on
    /// the elements selected).
    pub fn choose(&mut self, sel: &Selection) -> Result<(Candidate, f64)> {
        let (request, axes) = self.request_form(sel)?;
        if let Some(hit) = self.memo.get(&request) {
            return Ok(hit.clone());
        }
        let mut cands = self.candidates_of(&request, axes, true)?;
        let original = cands[0].seconds;
        let mut best = 0;
        for (i, c) in cands.iter().enumerate().skip(1) {
            if c.seconds < cands[best].seconds {
                best = i;
            }
        }
        let cheapest = cands.swap_remove(best);
        let saving = original - cheapest.seconds;
        let chosen = (cheapest, saving);
        if self.memo.len() >= MEMO {
            self.memo.clear();
        }
        self.memo.insert(request, chosen.clone());
        Ok(chosen)
    }

    /// The candidate of concatenated product replica `i` for a product request with
    /// index sets `axes` (`req`: the same as [`IndexSet`]s).
    #[allow(clippy::too_many_arguments)]
    fn concat_product(
        &self,
        i: usize,
        sets: &[Axis],
        perm: &[usize],
        axes: &[Axis],
        req: &[IndexSet],
        bound: Option<Bound>,
    ) -> Result<Option<Candidate>> {
        let held_sets = &self.sets[i];
        let outside: Vec<usize> = (0..axes.len())
            .filter(|&j| !held_sets[j].set.contains(&req[j]))
            .collect();
        let pos = |j: usize, a: &Axis| positions_from(a, &sets[j], &held_sets[j].before);
        if outside.is_empty() {
            let g = Grid {
                axes: (0..axes.len()).map(|j| pos(j, &axes[j])).collect(),
            };
            let part = permuted(&Selection::grid(g), perm);
            return Ok(Some(self.candidate(Plan::Sub(i), vec![(Some(i), part)])?));
        }
        if outside.len() > 1 {
            return Ok(None);
        }
        let k = outside[0];
        let held = req[k].intersect(&held_sets[k].set);
        if held.is_empty() {
            return Ok(None);
        }
        let rest = req[k].subtract(&held_sets[k].set);
        if let Some(b) = bound {
            let floor = self.floor(i, Self::elements_with(axes, k, held.len()));
            if self.cannot_win(k, axes, &held, &rest, floor, b) {
                return Ok(None);
            }
        }
        let (held, rest) = (held.to_axis(), rest.to_axis());
        let g = Grid {
            axes: (0..axes.len())
                .map(|j| {
                    if j == k {
                        pos(j, &held)
                    } else {
                        pos(j, &axes[j])
                    }
                })
                .collect(),
        };
        let parts = vec![
            (Some(i), permuted(&Selection::grid(g), perm)),
            (None, with_axis(axes, k, rest)),
        ];
        let plan = Plan::Split {
            replica: i,
            axis: k,
        };
        self.bounded(plan, parts, || with_axis(axes, k, held), bound)
    }

    fn concat_points(
        &self,
        i: usize,
        linear: &[u64],
        coords: &[u64],
        req: &PointsRequest,
        bound: Option<Bound>,
    ) -> Result<Option<Candidate>> {
        let shape = &self.original.shape;
        let d = shape.len().max(1);
        let (held, rest) = req.split(linear);
        if held.is_empty() {
            return Ok(None);
        }
        let mut parts = vec![(
            Some(i),
            Selection::Points {
                rank: 1,
                coords: held.iter().map(|h| h.0).collect(),
            },
        )];
        let has_rest = !rest.is_empty();
        if has_rest {
            parts.push((
                None,
                Selection::Points {
                    rank: shape.len(),
                    coords: rest
                        .iter()
                        .flat_map(|&p| &coords[p * d..(p + 1) * d])
                        .copied()
                        .collect(),
                },
            ));
        }
        let plan = Plan::Points {
            replica: i,
            rest: has_rest,
        };
        let held_points = || Selection::Points {
            rank: shape.len(),
            coords: held
                .iter()
                .flat_map(|h| &coords[h.1 * d..(h.1 + 1) * d])
                .copied()
                .collect(),
        };
        self.bounded(plan, parts, held_points, bound)
    }

    fn combined(
        &self,
        axes: &[Axis],
        req: &[IndexSet],
        bound: Option<Bound>,
    ) -> Result<Option<Candidate>> {
        let d = axes.len();
        let mut best: Option<Candidate> = None;
        for k in 0..d {
            let mut usable: Vec<(usize, &[Axis], &[usize])> = self
                .replicas
                .iter()
                .enumerate()
                .filter_map(|(i, r)| match &r.holds {
                    Holds::Product { sets, perm }
                        if (0..d).all(|j| j == k || self.sets[i][j].set.contains(&req[j])) =>
                    {
                        Some((i, sets.as_slice(), perm.as_slice()))
                    }
                    _ => None,
                })
                .collect();
            if usable.len() < 2 {
                continue;
            }
            if let Some(b) = bound {
                // The rest of any combination keeps at least what no usable replica
                // holds, so it loses no more pages than that alone; and it reads at
                // least two usable replicas, each at least one index along k.
                let none = usable.iter().fold(req[k].clone(), |left, u| {
                    left.subtract(&self.sets[u.0][k].set)
                });
                let one = Self::elements_with(axes, k, 1);
                let least = usable
                    .iter()
                    .map(|u| self.floor(u.0, one))
                    .fold(f64::INFINITY, f64::min);
                if !none.is_empty()
                    && self.cannot_win(k, axes, &req[k].subtract(&none), &none, 2.0 * least, b)
                {
                    continue;
                }
            }
            let mut missing = req[k].clone();
            let mut chosen: Vec<(usize, &[Axis], &[usize], Axis)> = Vec::new();
            // What each usable replica holds of what is missing: exact at first, then
            // an upper bound (it only shrinks as `missing` does), made exact when a
            // replica is about to be taken (lazy greedy: the same choices).
            let held_by = |u: &(usize, &[Axis], &[usize]), missing: &IndexSet| {
                missing.overlap(&self.sets[u.0][k].set)
            };
            let mut holds: Vec<u64> = usable.iter().map(|u| held_by(u, &missing)).collect();
            while !usable.is_empty() && !missing.is_empty() {
                let Some(at) = most_missing(&mut holds, |i| held_by(&usable[i], &missing)) else {
                    break;
                };
                holds.remove(at);
                let (i, sets, perm) = usable.remove(at);
                let gain = missing.intersect(&self.sets[i][k].set);
                missing = missing.subtract(&gain);
                chosen.push((i, sets, perm, gain.to_axis()));
            }
            let bound = bound.map(|b| Bound {
                best: best.as_ref().map_or(b.best, |c| c.seconds.min(b.best)),
                ..b
            });
            if chosen.len() < 2 {
                continue;
            }
            if let Some(b) = bound.filter(|_| !missing.is_empty()) {
                let floor: f64 = chosen
                    .iter()
                    .map(|c| self.floor(c.0, Self::elements_with(axes, k, c.3.len())))
                    .sum();
                if self.cannot_win(k, axes, &req[k].subtract(&missing), &missing, floor, b) {
                    continue;
                }
            }
            let missing = missing.to_axis();
            let mut parts = Vec::new();
            for (i, sets, perm, gain) in &chosen {
                let g = Grid {
                    axes: (0..d)
                        .map(|j| {
                            let a = if j == k { gain } else { &axes[j] };
                            positions_from(a, &sets[j], &self.sets[*i][j].before)
                        })
                        .collect(),
                };
                parts.push((Some(*i), permuted(&Selection::grid(g), perm)));
            }
            let rest = !missing.is_empty();
            let held = || with_axis(axes, k, subtract(&axes[k], &missing));
            if rest {
                parts.push((None, with_axis(axes, k, missing.clone())));
            }
            let plan = Plan::Combined {
                replicas: chosen.iter().map(|c| c.0).collect(),
                axis: k,
                rest,
            };
            if let Some(c) = self.bounded(plan, parts, held, bound)? {
                if best.as_ref().is_none_or(|b| c.seconds < b.seconds) {
                    best = Some(c);
                }
            }
        }
        Ok(best)
    }
}

/// The position of the replica holding most of what is missing (the first on ties),
/// None when none holds any. `bounds[i]` is at least what replica `i` holds and is made
/// exact with `exact(i)` before it is taken: the replica with the largest bound (the
/// first on ties) is taken once its exact count still reaches that bound, so the choice
/// is the one exact counts for every replica would give, with fewer counts.
fn most_missing(bounds: &mut [u64], exact: impl Fn(usize) -> u64) -> Option<usize> {
    loop {
        let (at, most) =
            bounds
                .iter()
                .enumerate()
                .fold((0, 0), |acc, (i, &n)| if n > acc.1 { (i, n) } else { acc });
        if most == 0 {
            return None;
        }
        let n = exact(at);
        if n == most {
            return Some(at);
        }
        bounds[at] = n;
    }
}

/// What pruning knows: the original's price and the cheapest candidate's so far.
///
/// A candidate reading replica parts and the rest `R` of the request `Q` from the
/// original costs at least `replicas + max(0, T(Q) - T(H))`, `H` the part of `Q` the
/// replicas serve, read from the original: `Q`'s pages (and runs of pages) on each
/// target are at most `H`'s plus `R`'s, and its decompressed bytes at most theirs, so
/// `T(Q) <= T(H) + T(R)` under eq 3.1.
#[derive(Clone, Copy, Debug)]
struct Bound {
    original: f64,
    best: f64,
}

impl Bound {
    /// True when a candidate costing at least `lower` cannot be chosen (with a margin
    /// for rounding: near-ties are priced in full).
    fn beaten(&self, lower: f64) -> bool {
        lower > self.best * (1.0 + 1e-9)
    }
}

/// A grid of `axes` with axis `k` replaced by `a`.
fn with_axis(axes: &[Axis], k: usize, a: Axis) -> Selection {
    let mut v = axes.to_vec();
    v[k] = a;
    Selection::grid(Grid { axes: v })
}

/// The request's points (`coords`, rank `shape.len()`) a point replica holding the
/// sorted row-major `linear` indices serves: `(position in the replica, request point)`
/// sorted by position, and the request points it lacks, in request order.
pub(crate) fn split_points(
    shape: &[u64],
    linear: &[u64],
    coords: &[u64],
) -> (Vec<(u64, usize)>, Vec<usize>) {
    PointsRequest::new(shape, coords).split(linear)
}

fn is_perm(perm: &[usize], d: usize) -> bool {
    let mut seen = vec![false; d];
    perm.len() == d
        && perm
            .iter()
            .all(|&a| a < d && !std::mem::replace(&mut seen[a], true))
}

/// `sel` in the array whose axis `i` is this one's `perm[i]`.
pub fn permuted(sel: &Selection, perm: &[usize]) -> Selection {
    match sel {
        Selection::Grids(gs) => Selection::Grids(
            gs.iter()
                .map(|g| Grid {
                    axes: perm.iter().map(|&a| g.axes[a].clone()).collect(),
                })
                .collect(),
        ),
        Selection::Points { rank, coords } => Selection::Points {
            rank: *rank,
            coords: coords
                .chunks((*rank).max(1))
                .flat_map(|p| perm.iter().map(move |&a| p[a]))
                .collect(),
        },
    }
}
