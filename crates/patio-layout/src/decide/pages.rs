//! How many of the original's pages a product request can stop touching when its
//! index set along one axis `k` loses some indices: the bound the decision's pruning
//! puts on the rest of a split or a combination ([`lost_pages`]).
//!
//! The removed blocks are cut at chunk boundaries along `k` (*pieces*). A piece with a
//! kept index on each side in the same chunk whose elements leave a gap shorter than a
//! page loses no page: every page of a removed element holds a byte of a kept one with
//! the same other coordinates. A piece at the request's edge has a kept neighbour on
//! one side only, or none; its elements are counted per *group* — one index tuple of
//! the slower axes and one chunk of each faster axis: in a chunk stored row-major the
//! group's element `x` along `k` lies at `pos(x) = base + (x - chunk start) * stride`
//! plus a faster offset below `stride`. What the group can lose is the pages strictly
//! between the kept bytes around the piece (or every page the piece spans, on a side
//! without kept bytes), at the group's real address. When the line just before (after)
//! the group along axis `k - 1` is in the request and in the same chunk, its kept
//! bytes bound the piece from below (above): if they lie within a page of the group's
//! own, the group loses nothing, so only the first (last) group of each run along
//! `k - 1` is counted — one per frame for an edge atom of a trajectory box, not one
//! per atom.

use crate::axes::bits::IndexSet;
use crate::layout::{row_major_strides, Layout};
use crate::selection::Axis;

/// Groups counted at most per bound (beyond: no bound).
pub(super) const MAX_GROUPS: u64 = 4096;

/// An upper bound on the pages of `l` that the product request `axes` no longer touches
/// when its set along `k` is reduced to `kept` (`removed` the indices taken out), at
/// pages of `page` bytes. `Some(0)` when every piece has kept neighbours on both sides
/// within a page (then also no filtered chunk is lost); None as soon as the bound
/// exceeds `limit` (what the caller can use), when a piece is at an edge of filtered
/// storage, or when more than [`MAX_GROUPS`] groups would be counted.
pub(super) fn lost_pages(
    l: &Layout,
    page: u64,
    axes: &[Axis],
    k: usize,
    (removed, kept): (&IndexSet, &IndexSet),
    limit: u64,
) -> Option<u64> {
    let (c, item) = (l.chunk[k], l.itemsize);
    let stride = l.chunk[k + 1..].iter().product::<u64>() * item;
    // Kept indices farther than this from a piece bound nothing a page could hold.
    let reach = (page + 2 * item) / stride + 1;
    let mut total = 0u64;
    let mut budget = MAX_GROUPS;
    let mut values = Values::new(l, axes, k);
    let whole = removed.each_block(|s, n| {
        let mut a = s;
        while a < s + n {
            let cs = a / c * c;
            let b = (s + n).min(cs + c);
            let lo = kept.nearest_below(a, (a - cs).min(reach));
            let hi = kept.nearest_from(b, (cs + c - b).min(reach));
            let interior = match (lo, hi) {
                (Some(lo), Some(hi)) => {
                    (hi - lo).saturating_mul(stride).saturating_sub(item) < page
                }
                _ => false,
            };
            if !interior {
                let piece = Piece {
                    cs,
                    a,
                    b,
                    lo,
                    hi,
                    stride,
                    reach,
                };
                match piece.pages(&mut values, page, kept, &mut budget, limit - total) {
                    Some(p) => total += p,
                    None => return false,
                }
            }
            a = b;
        }
        true
    });
    whole.then_some(total)
}

/// A removed piece `a..b` inside the chunk starting at `cs` along `k`, with its nearest
/// kept indices in that chunk below (`lo`) and above (`hi`).
struct Piece {
    cs: u64,
    a: u64,
    b: u64,
    lo: Option<u64>,
    hi: Option<u64>,
    stride: u64,
    reach: u64,
}

/// What the groups of a bound's pieces take on each axis — indices of the slower axes,
/// chunks of the faster ones, the run ends along `k - 1` — made once per bound, when a
/// first piece at an edge needs them.
struct Values<'a> {
    l: &'a Layout,
    axes: &'a [Axis],
    k: usize,
    /// Per axis (None on `k`; None where more indices than [`MAX_GROUPS`]).
    plain: Option<Vec<Option<Vec<u64>>>>,
    /// The first (0) and last (1) index of each run along `k - 1` inside a chunk.
    ends: [Option<Vec<u64>>; 2],
    grid: Vec<u64>,
    inner: Vec<u64>,
}

impl<'a> Values<'a> {
    fn new(l: &'a Layout, axes: &'a [Axis], k: usize) -> Values<'a> {
        Values {
            l,
            axes,
            k,
            plain: None,
            ends: [None, None],
            grid: Vec::new(),
            inner: Vec::new(),
        }
    }

    /// The values of axis `j != k`, with only run ends along `k - 1` under a wrap.
    fn of(&mut self, j: usize, wrap: Wrap) -> Option<&[u64]> {
        let (l, axes, k) = (self.l, self.axes, self.k);
        self.prepare();
        if j + 1 == k && wrap != Wrap::None {
            let at = usize::from(wrap == Wrap::After);
            let ends = self.ends[at]
                .get_or_insert_with(|| run_ends(&axes[j], l.chunk[j], wrap == Wrap::Before));
            return Some(ends);
        }
        self.plain.as_ref()?[j].as_deref()
    }

    /// The strides and per-axis lists, made at the first use (also when `k` is the only
    /// axis and no list is asked for).
    fn prepare(&mut self) {
        let (l, axes, k) = (self.l, self.axes, self.k);
        if self.plain.is_none() {
            self.grid = row_major_strides(&l.grid());
            self.inner = row_major_strides(&l.chunk);
            let plain = (0..axes.len())
                .map(|j| match j.cmp(&k) {
                    std::cmp::Ordering::Greater => Some(chunks_of(&axes[j], l.chunk[j])),
                    std::cmp::Ordering::Less if axes[j].len() <= MAX_GROUPS => {
                        Some(axes[j].blocks.iter().flat_map(|&(s, n)| s..s + n).collect())
                    }
                    _ => None,
                })
                .collect();
            self.plain = Some(plain);
        }
    }
}

/// Which groups a neighbouring line along `k - 1` covers.
#[derive(Clone, Copy, PartialEq)]
enum Wrap {
    None,
    /// Groups whose line before is in the request (in the same chunk) lose nothing.
    Before,
    /// Groups whose line after is in the request (in the same chunk) lose nothing.
    After,
}

impl Piece {
    /// The pages the piece's groups can lose, summed; None for chunks read whole, when
    /// the groups exceed `budget` (which they use up) or the sum exceeds `limit`.
    fn pages(
        &self,
        values: &mut Values,
        page: u64,
        kept: &IndexSet,
        budget: &mut u64,
        limit: u64,
    ) -> Option<u64> {
        let (l, k) = (values.l, values.k);
        if l.whole_chunks() {
            return None;
        }
        let (c, item, stride) = (l.chunk[k], l.itemsize, self.stride);
        // The neighbouring line's kept bytes within a page of the group's own: with
        // `d` the distance along `k` from the neighbouring line's outermost kept index
        // to the group's nearest one, the last kept byte before the piece (K1) and the
        // first after it (K2) satisfy K2 - K1 <= (c - d + 1) * stride - 2 * item + 1,
        // so no page lies wholly between them when that is at most a page.
        let near = |d: u64| (c - d + 1).saturating_mul(stride) < page + 2 * item;
        // (A kept index nearer the group's own than the outermost one, as a search within
        // `reach` of the chunk's edge may give, only makes `d` smaller: still a bound.)
        let reach = self.reach.min(c);
        let wrap = match (self.lo, self.hi, k) {
            (_, _, 0) => Wrap::None,
            (None, Some(hi), _) => {
                let last = kept.nearest_below(self.cs + c, reach).unwrap_or(hi).max(hi);
                if near(last - hi) {
                    Wrap::Before
                } else {
                    Wrap::None
                }
            }
            (Some(lo), None, _) => {
                let first = kept.nearest_from(self.cs, reach).unwrap_or(lo).min(lo);
                if near(lo - first) {
                    Wrap::After
                } else {
                    Wrap::None
                }
            }
            _ => Wrap::None,
        };
        // Per axis the values the groups take: indices of the slower axes (on `k - 1`
        // only the run ends a wrap leaves), chunks of the faster ones.
        let cs = [self.cs];
        let mut lists: Vec<Vec<u64>> = Vec::with_capacity(values.axes.len());
        for j in 0..values.axes.len() {
            lists.push(if j == k {
                cs.to_vec()
            } else {
                values.of(j, wrap)?.to_vec()
            });
        }
        let groups = lists
            .iter()
            .try_fold(1u64, |acc, v| acc.checked_mul(v.len() as u64))?;
        if groups > *budget {
            return None;
        }
        *budget -= groups;
        values.prepare();
        let (grid, inner) = (&values.grid, &values.inner);
        let mut at = vec![0usize; lists.len()];
        let mut lost = 0u64;
        for _ in 0..groups {
            let (mut chunk, mut local) = (0u64, 0u64);
            for (j, v) in lists.iter().enumerate() {
                let x = v[at[j]];
                if j > k {
                    chunk += x * grid[j];
                } else {
                    chunk += x / l.chunk[j] * grid[j];
                    local += x % l.chunk[j] * inner[j];
                }
            }
            if let Some(base) = l.addresses[chunk as usize] {
                let pos = |x: u64| base + local * item + (x - self.cs) * stride;
                let mut first = pos(self.a) / page;
                let mut end = (pos(self.b - 1) + stride - 1) / page + 1;
                if let Some(lo) = self.lo {
                    first = first.max((pos(lo) + item - 1) / page + 1);
                }
                if let Some(hi) = self.hi {
                    end = end.min((pos(hi) + stride - item) / page);
                }
                lost += end.saturating_sub(first);
                if lost > limit {
                    return None;
                }
            }
            for j in (0..at.len()).rev() {
                at[j] += 1;
                if at[j] < lists[j].len() {
                    break;
                }
                at[j] = 0;
            }
        }
        Some(lost)
    }
}

/// The chunks (along an axis of chunk side `c`) the blocks of `a` touch, in order
/// (the blocks inside a chunk already listed skipped by a binary search).
fn chunks_of(a: &Axis, c: u64) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let mut i = 0;
    while let Some(&(s, n)) = a.blocks.get(i) {
        let last = (s + n - 1) / c;
        for x in s / c..=last {
            if out.last() != Some(&x) {
                out.push(x);
            }
        }
        let next = (last + 1).saturating_mul(c);
        i += 1 + a.blocks[i + 1..].partition_point(|b| b.0 + b.1 <= next);
    }
    out
}

/// The indices of `a` whose neighbour before (`before`) or after is not in `a` or not
/// in the same chunk of side `c`: the first (last) index of each run inside a chunk.
fn run_ends(a: &Axis, c: u64, before: bool) -> Vec<u64> {
    let mut out = Vec::new();
    for &(s, n) in &a.blocks {
        let mut x = s;
        while x < s + n {
            let end = (s + n).min(x / c * c + c);
            out.push(if before { x } else { end - 1 });
            x = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axes::bits::MAX_BITS;
    use crate::flatten::flatten;
    use crate::selection::{Grid, Selection};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The pages of `page` bytes the grid `axes` touches under `l`, from its extents.
    fn pages_of(l: &Layout, axes: &[Axis], page: u64) -> BTreeSet<u64> {
        if axes.iter().any(Axis::is_empty) {
            return BTreeSet::new();
        }
        let sel = Selection::grid(Grid {
            axes: axes.to_vec(),
        });
        let f = flatten(l, &sel).unwrap();
        f.extents
            .iter()
            .flat_map(|&(o, n)| o / page..=(o + n - 1) / page)
            .collect()
    }

    fn axis(v: &[u64]) -> Axis {
        Axis::from_sorted_indices(v).unwrap()
    }

    /// The pages the request loses when its set along `k` keeps only `kept`.
    fn truth(l: &Layout, axes: &[Axis], k: usize, kept: &Axis, page: u64) -> u64 {
        let mut rest = axes.to_vec();
        rest[k] = kept.clone();
        let before = pages_of(l, axes, page);
        let after = pages_of(l, &rest, page);
        before.difference(&after).count() as u64
    }

    /// A splitmix64 stream: the test's array, layout and request from one seed.
    struct Draw(u64);

    impl Draw {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Chunked arrays of rank 1-3 with chunks in shuffled order (some unallocated),
        /// tiny pages, random product requests and random removals along a random axis:
        /// the bound is never below the pages the request really loses.
        #[test]
        fn lost_pages_bound_what_a_request_loses(
            shape in prop::collection::vec(1..13u64, 1..4),
            seed in any::<u64>(),
            item in prop::sample::select(vec![1u64, 2, 4, 8]),
            page in prop::sample::select(vec![4u64, 8, 16, 32, 64]),
            holes in any::<bool>(),
            long in any::<bool>(),
            cached in any::<bool>(),
        ) {
            let mut r = Draw(seed);
            let chunk: Vec<u64> = shape.iter().map(|&n| 1 + r.below(n)).collect();
            let cells: u64 = shape.iter().zip(&chunk).map(|(&n, &c)| n.div_ceil(c)).product();
            let bytes = chunk.iter().product::<u64>() * item;
            let mut order: Vec<u64> = (0..cells).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, r.below(i as u64 + 1) as usize);
            }
            let mut at = r.below(page);
            let mut addr = vec![0i64; cells as usize];
            for &c in &order {
                addr[c as usize] = if holes && r.below(4) == 0 { -1 } else { at as i64 };
                at += bytes + r.below(2) * r.below(2 * page);
            }
            // Read in part (no chunk cache), or whole as HDF5 reads chunks that fit its
            // cache: then the bound may decline (None), and where it answers it holds.
            let l = Layout::chunked(&shape, item, &chunk, &addr, None)
                .unwrap()
                .with_chunk_cache(if cached { u64::MAX } else { 0 });
            let axes: Vec<Axis> = shape
                .iter()
                .map(|&n| {
                    let mut v: Vec<u64> = (0..n).filter(|_| r.below(5) < 3).collect();
                    if v.is_empty() {
                        v.push(r.below(n));
                    }
                    axis(&v)
                })
                .collect();
            let k = r.below(shape.len() as u64) as usize;
            let q: Vec<u64> = axes[k].blocks.iter().flat_map(|&(s, n)| s..s + n).collect();
            let (removed, kept): (Vec<u64>, Vec<u64>) = q.iter().partition(|_| r.below(5) < 2);
            let len = if long { MAX_BITS + 1 } else { shape[k] };
            let (rm, kp) = (axis(&removed), axis(&kept));
            let (rm_set, kp_set) = (IndexSet::new(&rm, len), IndexSet::new(&kp, len));
            let bound = lost_pages(&l, page, &axes, k, (&rm_set, &kp_set), u64::MAX);
            let Some(n) = bound else {
                if cached {
                    return Ok(());
                }
                return Err(TestCaseError::fail("no bound on an unfiltered array of few groups"));
            };
            let lost = truth(&l, &axes, k, &kp, page);
            prop_assert!(n >= lost, "bound {} < lost {} (k {}, removed {:?})", n, lost, k, removed);
        }
    }

    /// A trajectory box `(frames, atoms, 3)`, one frame per chunk, frames not page
    /// aligned: taking out the x coordinate, or the box's first atom, can lose at most
    /// one page per frame (the first group of each frame is the only one counted), and
    /// the bound says so.
    #[test]
    fn an_edge_of_a_trajectory_box_loses_at_most_a_page_per_frame() {
        let (frames, atoms, page) = (6u64, 64u64, 64u64);
        let frame = atoms * 3 * 4;
        let addr: Vec<i64> = (0..frames)
            .map(|t| (100 + t * (frame + 20)) as i64)
            .collect();
        // Read in part: a frame's chunk larger than the reader's chunk cache.
        let l = Layout::chunked(&[frames, atoms, 3], 4, &[1, atoms, 3], &addr, None)
            .unwrap()
            .with_chunk_cache(0);
        let all = |n: u64| axis(&(0..n).collect::<Vec<_>>());
        let boxed = vec![all(frames), axis(&(8..40).collect::<Vec<_>>()), all(3)];
        for (k, removed, kept) in [
            (2, vec![0], vec![1, 2]),
            (1, vec![8], (9..40).collect::<Vec<_>>()),
            (1, vec![39], (8..39).collect()),
        ] {
            let (rm, kp) = (axis(&removed), axis(&kept));
            let sets = (
                IndexSet::new(&rm, l.shape[k]),
                IndexSet::new(&kp, l.shape[k]),
            );
            let n = lost_pages(&l, page, &boxed, k, (&sets.0, &sets.1), u64::MAX).unwrap();
            assert_eq!(
                lost_pages(&l, page, &boxed, k, (&sets.0, &sets.1), n.max(1) - 1).is_some(),
                n == 0,
                "a bound above the limit is not made"
            );
            assert!(n >= truth(&l, &boxed, k, &kp, page), "{k} {removed:?}");
            assert!(n <= frames, "{k} {removed:?}: {n}");
        }
        // Inside the box, with kept atoms on both sides, nothing is lost.
        let (rm, kp) = (
            axis(&[20]),
            axis(&[(8..20).collect::<Vec<_>>(), (21..40).collect()].concat()),
        );
        let sets = (IndexSet::new(&rm, atoms), IndexSet::new(&kp, atoms));
        assert_eq!(
            lost_pages(&l, page, &boxed, 1, (&sets.0, &sets.1), 0),
            Some(0)
        );
    }
}
