//! Set algebra on per-axis block lists ([`Axis`]): what the decision asks of a product
//! selection and a concatenated replica's index sets — containment, intersection,
//! difference, union, and an index set's positions inside another — each in
//! `O(blocks)`, never per index.

use crate::selection::{Axis, Grid, Selection};
use std::borrow::Cow;

pub mod bits;

/// `a ∩ b`.
pub fn intersect(a: &Axis, b: &Axis) -> Axis {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.blocks.len() && j < b.blocks.len() {
        let (s1, e1) = (a.blocks[i].0, a.blocks[i].0 + a.blocks[i].1);
        let (s2, e2) = (b.blocks[j].0, b.blocks[j].0 + b.blocks[j].1);
        let (s, e) = (s1.max(s2), e1.min(e2));
        if s < e {
            push_joined(&mut out, s, e - s);
        }
        if e1 <= e2 {
            i += 1;
        } else {
            j += 1;
        }
    }
    Axis { blocks: out }
}

/// `|a ∩ b|`, without building the intersection.
pub fn overlap(a: &Axis, b: &Axis) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0u64);
    while i < a.blocks.len() && j < b.blocks.len() {
        let (s1, e1) = (a.blocks[i].0, a.blocks[i].0 + a.blocks[i].1);
        let (s2, e2) = (b.blocks[j].0, b.blocks[j].0 + b.blocks[j].1);
        n += e1.min(e2).saturating_sub(s1.max(s2));
        if e1 <= e2 {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

/// `a \ b`.
pub fn subtract(a: &Axis, b: &Axis) -> Axis {
    let mut out = Vec::new();
    let mut j = 0;
    for &(s, n) in &a.blocks {
        let (mut lo, hi) = (s, s + n);
        while j < b.blocks.len() && b.blocks[j].0 + b.blocks[j].1 <= lo {
            j += 1;
        }
        let mut k = j;
        while lo < hi {
            match b.blocks.get(k) {
                Some(&(bs, bn)) if bs < hi => {
                    if bs > lo {
                        push_joined(&mut out, lo, bs - lo);
                    }
                    lo = lo.max(bs + bn);
                    k += 1;
                }
                _ => {
                    push_joined(&mut out, lo, hi - lo);
                    lo = hi;
                }
            }
        }
    }
    Axis { blocks: out }
}

/// True when every index of `a` is in `b` (stops at the first block of `a` that
/// leaves `b`).
pub fn contains(b: &Axis, a: &Axis) -> bool {
    let mut j = 0;
    for &(s, n) in &a.blocks {
        let mut lo = s;
        while lo < s + n {
            while j < b.blocks.len() && b.blocks[j].0 + b.blocks[j].1 <= lo {
                j += 1;
            }
            match b.blocks.get(j) {
                Some(&(bs, bn)) if bs <= lo => lo = bs + bn,
                _ => return false,
            }
        }
    }
    true
}

/// The union of several block lists.
pub fn union<'a>(axes: impl Iterator<Item = &'a Axis>) -> Axis {
    let mut all: Vec<(u64, u64)> = axes.flat_map(|a| a.blocks.iter().copied()).collect();
    all.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, n) in all {
        match out.last_mut() {
            Some(last) if s <= last.0 + last.1 => last.1 = last.1.max(s + n - last.0),
            _ => out.push((s, n)),
        }
    }
    Axis { blocks: out }
}

/// The position of each block's first index in the sorted index set `s`, and `s`'s size.
pub(crate) fn offsets(s: &Axis) -> (Vec<u64>, u64) {
    let mut before = Vec::with_capacity(s.blocks.len());
    let mut total = 0u64;
    for &(_, n) in &s.blocks {
        before.push(total);
        total += n;
    }
    (before, total)
}

/// The positions of `a`'s indices in the sorted index set `s` (`a ⊆ s`): position `p`
/// of index `i` is the number of indices of `s` below `i`.
pub fn positions(a: &Axis, s: &Axis) -> Axis {
    positions_from(a, s, &offsets(s).0)
}

/// [`positions`] with `s`'s block offsets ([`offsets`]) made beforehand.
pub(crate) fn positions_from(a: &Axis, s: &Axis, before: &[u64]) -> Axis {
    let mut out = Vec::new();
    for &(start, n) in &a.blocks {
        let (mut lo, hi) = (start, start + n);
        while lo < hi {
            let k = s.blocks.partition_point(|b| b.0 + b.1 <= lo);
            let Some(&(bs, bn)) = s.blocks.get(k) else {
                break;
            };
            let lo_in = lo.max(bs);
            let hi_in = hi.min(bs + bn);
            if lo_in >= hi_in {
                break;
            }
            push_joined(&mut out, before[k] + (lo_in - bs), hi_in - lo_in);
            lo = hi_in;
        }
    }
    Axis { blocks: out }
}

/// The indices of the sorted index set `s` at the positions `p` (every position below
/// `s.len()`): the inverse of [`positions`].
pub fn at_positions(p: &Axis, s: &Axis) -> Axis {
    let (before, total) = offsets(s);
    let mut out = Vec::new();
    for &(start, n) in &p.blocks {
        let (mut lo, hi) = (start, start + n);
        while lo < hi && lo < total {
            let k = before.partition_point(|&b| b <= lo) - 1;
            let (bs, bn) = s.blocks[k];
            let take = (hi - lo).min(before[k] + bn - lo);
            push_joined(&mut out, bs + (lo - before[k]), take);
            lo += take;
        }
    }
    Axis { blocks: out }
}

fn push_joined(out: &mut Vec<(u64, u64)>, s: u64, n: u64) {
    match out.last_mut() {
        Some(last) if last.0 + last.1 == s => last.1 += n,
        _ => out.push((s, n)),
    }
}

/// The per-axis index sets when `sel` is their Cartesian product (one grid, or a union
/// of disjoint grids that together form a product, as h5py's fancy indexing hands
/// over), else None (points, irregular unions).
pub fn product_axes(sel: &Selection, rank: usize) -> Option<Vec<Axis>> {
    let Selection::Grids(gs) = sel else {
        return None;
    };
    match gs.len() {
        0 => Some(vec![Axis { blocks: Vec::new() }; rank]),
        1 => Some(gs[0].axes.clone()),
        _ => {
            let axes: Vec<Axis> = (0..rank)
                .map(|j| union(gs.iter().map(|g| &g.axes[j])))
                .collect();
            let product = Grid { axes: axes.clone() }.nelements();
            (product == sel.nelements()).then_some(axes)
        }
    }
}

/// `sel` in the form it is priced and decided in, with its product axes: a union of
/// grids that forms a product (h5py's fancy indexing) becomes the one grid it equals —
/// the same elements, so the same plans and prices, flattened with pages joined across
/// its blocks.
pub fn priced_form(sel: &Selection, rank: usize) -> (Cow<'_, Selection>, Option<Vec<Axis>>) {
    let axes = product_axes(sel, rank);
    let form = match (&axes, sel) {
        (Some(a), Selection::Grids(gs)) if gs.len() > 1 => {
            Cow::Owned(Selection::grid(Grid { axes: a.clone() }))
        }
        _ => Cow::Borrowed(sel),
    };
    (form, axes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn axis_of(s: &BTreeSet<u64>) -> Axis {
        Axis::from_sorted_indices(&s.iter().copied().collect::<Vec<_>>()).unwrap()
    }

    fn set_of(a: &Axis) -> BTreeSet<u64> {
        a.blocks.iter().flat_map(|&(s, n)| s..s + n).collect()
    }

    proptest! {
        #[test]
        fn set_algebra_matches_sets(a in prop::collection::btree_set(0..60u64, 0..30),
                                    b in prop::collection::btree_set(0..60u64, 0..30)) {
            let (x, y) = (axis_of(&a), axis_of(&b));
            prop_assert_eq!(set_of(&intersect(&x, &y)), a.intersection(&b).copied().collect());
            prop_assert_eq!(overlap(&x, &y), a.intersection(&b).count() as u64);
            prop_assert_eq!(set_of(&subtract(&x, &y)), a.difference(&b).copied().collect());
            prop_assert_eq!(contains(&y, &x), a.is_subset(&b));
            let u = union([&x, &y].into_iter());
            prop_assert_eq!(set_of(&u), a.union(&b).copied().collect());
            let held = intersect(&x, &y);
            let want: BTreeSet<u64> = set_of(&held)
                .iter()
                .map(|i| b.iter().filter(|&&v| v < *i).count() as u64)
                .collect();
            prop_assert_eq!(set_of(&positions(&held, &y)), want);
            prop_assert_eq!(at_positions(&positions(&held, &y), &y), held);
        }
    }
}
