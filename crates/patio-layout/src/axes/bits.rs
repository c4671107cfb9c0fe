//! Index sets of one axis for the decision's set algebra, as bitmaps where the axis is
//! short enough and as block lists otherwise.
//!
//! Weighing a concatenated replica asks, per axis, whether its index set holds the
//! request's, what they share and what is left; combining replicas asks how much of what
//! is still missing each one holds, round after round. On block lists each question
//! costs a merge over both lists — thousands of steps for a strided slab or an atom
//! selection, times every replica. On an axis of at most [`MAX_BITS`] indices the same
//! questions are word-wise `and`/`and not`/popcounts, over only the words between a set's
//! first and last index (at most `len / 64`: 313 words for 20,000 atoms, 8 for a box of
//! 500), and a replica's bitmap is made once per decider. Every answer is the same as
//! the block algebra's ([`crate::axes`]), checked by a property test.

use crate::axes::{contains, intersect, overlap, subtract};
use crate::selection::Axis;
use std::borrow::Cow;

/// Axes up to this many indices are held as bitmaps (at most 512 KiB each).
pub const MAX_BITS: u64 = 1 << 22;

/// One axis' index set: a bitmap, or the sorted block list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexSet {
    /// Bit `i` of `words[w]` is index `(lo + w) * 64 + i`; no index outside.
    Bits {
        lo: usize,
        words: Vec<u64>,
    },
    Blocks(Axis),
}

impl IndexSet {
    /// `a`, on an axis of `len` indices (every index of `a` below `len`).
    pub fn new(a: &Axis, len: u64) -> IndexSet {
        if len > MAX_BITS {
            return IndexSet::Blocks(a.clone());
        }
        if a.is_empty() {
            return IndexSet::Bits {
                lo: 0,
                words: Vec::new(),
            };
        }
        let lo = (a.first() / 64) as usize;
        let hi = ((a.end() - 1) / 64) as usize + 1;
        let mut words = vec![0u64; hi - lo];
        for &(s, n) in &a.blocks {
            set_range(&mut words, s - lo as u64 * 64, s + n - lo as u64 * 64);
        }
        IndexSet::Bits { lo, words }
    }

    /// The sorted block list of the set.
    pub fn to_axis(&self) -> Axis {
        self.blocks().into_owned()
    }

    /// The sorted block list of the set: a block list borrowed as it is, a bitmap's
    /// made from its words. The block algebra's operands when either side is a block
    /// list (an axis longer than [`MAX_BITS`]), so a long axis is never copied.
    pub fn blocks(&self) -> Cow<'_, Axis> {
        match self {
            IndexSet::Blocks(a) => Cow::Borrowed(a),
            IndexSet::Bits { .. } => {
                let mut blocks = Vec::new();
                self.each_block(|s, n| {
                    blocks.push((s, n));
                    true
                });
                Cow::Owned(Axis { blocks })
            }
        }
    }

    /// Calls `f(start, len)` for each block in order while it returns true; false when
    /// `f` stopped it.
    pub fn each_block(&self, mut f: impl FnMut(u64, u64) -> bool) -> bool {
        match self {
            IndexSet::Blocks(a) => a.blocks.iter().all(|&(s, n)| f(s, n)),
            IndexSet::Bits { lo, words } => {
                let mut open: Option<(u64, u64)> = None;
                for (i, &word) in words.iter().enumerate() {
                    let mut x = word;
                    let base = (lo + i) as u64 * 64;
                    while x != 0 {
                        let start = x.trailing_zeros() as u64;
                        let len = (!(x >> start)).trailing_zeros() as u64;
                        let s = base + start;
                        match open {
                            Some((os, on)) if os + on == s => open = Some((os, on + len)),
                            Some((os, on)) => {
                                if !f(os, on) {
                                    return false;
                                }
                                open = Some((s, len));
                            }
                            None => open = Some((s, len)),
                        }
                        x = if start + len >= 64 {
                            0
                        } else {
                            x & (u64::MAX << (start + len))
                        };
                    }
                }
                open.is_none_or(|(s, n)| f(s, n))
            }
        }
    }

    /// The number of indices in the set.
    pub fn len(&self) -> u64 {
        match self {
            IndexSet::Blocks(a) => a.len(),
            IndexSet::Bits { words, .. } => words.iter().map(|x| u64::from(x.count_ones())).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            IndexSet::Blocks(a) => a.is_empty(),
            IndexSet::Bits { words, .. } => words.iter().all(|&x| x == 0),
        }
    }

    /// `|self ∩ other|`.
    pub fn overlap(&self, other: &IndexSet) -> u64 {
        match (self, other) {
            (IndexSet::Bits { .. }, IndexSet::Bits { .. }) => {
                let (lo, hi) = common(self, other);
                (lo..hi)
                    .map(|w| (self.word(w) & other.word(w)).count_ones() as u64)
                    .sum()
            }
            _ => overlap(&self.blocks(), &other.blocks()),
        }
    }

    /// True when every index of `other` is in `self`.
    pub fn contains(&self, other: &IndexSet) -> bool {
        match (self, other) {
            (IndexSet::Bits { .. }, IndexSet::Bits { lo, words }) => words
                .iter()
                .enumerate()
                .all(|(i, &y)| y & !self.word(lo + i) == 0),
            _ => contains(&self.blocks(), &other.blocks()),
        }
    }

    /// `self ∩ other`.
    pub fn intersect(&self, other: &IndexSet) -> IndexSet {
        match (self, other) {
            (IndexSet::Bits { .. }, IndexSet::Bits { .. }) => {
                let (lo, hi) = common(self, other);
                IndexSet::Bits {
                    lo,
                    words: (lo..hi).map(|w| self.word(w) & other.word(w)).collect(),
                }
            }
            _ => IndexSet::Blocks(intersect(&self.blocks(), &other.blocks())),
        }
    }

    /// `self \ other`.
    pub fn subtract(&self, other: &IndexSet) -> IndexSet {
        match (self, other) {
            (IndexSet::Bits { lo, words }, IndexSet::Bits { .. }) => IndexSet::Bits {
                lo: *lo,
                words: words
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| x & !other.word(lo + i))
                    .collect(),
            },
            _ => IndexSet::Blocks(subtract(&self.blocks(), &other.blocks())),
        }
    }

    /// The largest index of the set below `x` and at least `x - within`.
    pub fn nearest_below(&self, x: u64, within: u64) -> Option<u64> {
        let low = x.saturating_sub(within);
        match self {
            IndexSet::Blocks(a) => {
                let k = a.blocks.partition_point(|b| b.0 < x);
                let &(s, n) = a.blocks.get(k.checked_sub(1)?)?;
                let last = (s + n).min(x) - 1;
                (last >= low).then_some(last)
            }
            IndexSet::Bits { lo, words } => {
                let first = *lo as u64 * 64;
                let end = (lo + words.len()) as u64 * 64;
                if x <= first.max(low) || words.is_empty() {
                    return None;
                }
                let top = (x - 1).min(end - 1);
                let mut w = (top / 64) as usize;
                let mut word = self.word(w) & (u64::MAX >> (63 - top % 64));
                loop {
                    if word != 0 {
                        let at = w as u64 * 64 + 63 - word.leading_zeros() as u64;
                        return (at >= low).then_some(at);
                    }
                    if w <= *lo || (w as u64 * 64) <= low {
                        return None;
                    }
                    w -= 1;
                    word = self.word(w);
                }
            }
        }
    }

    /// The smallest index of the set at or above `x` and below `x + within`.
    pub fn nearest_from(&self, x: u64, within: u64) -> Option<u64> {
        let high = x.saturating_add(within);
        match self {
            IndexSet::Blocks(a) => {
                let k = a.blocks.partition_point(|b| b.0 + b.1 <= x);
                let &(s, _) = a.blocks.get(k)?;
                let at = s.max(x);
                (at < high).then_some(at)
            }
            IndexSet::Bits { lo, words } => {
                let end = (lo + words.len()) as u64 * 64;
                let from = x.max(*lo as u64 * 64);
                if from >= end.min(high) {
                    return None;
                }
                let mut w = (from / 64) as usize;
                let mut word = self.word(w) & (u64::MAX << (from % 64));
                loop {
                    if word != 0 {
                        let at = w as u64 * 64 + word.trailing_zeros() as u64;
                        return (at < high).then_some(at);
                    }
                    w += 1;
                    if w >= lo + words.len() || w as u64 * 64 >= high {
                        return None;
                    }
                    word = self.word(w);
                }
            }
        }
    }

    /// Word `w` of a bitmap (absolute: indices `w * 64 ..`), zero outside its words.
    fn word(&self, w: usize) -> u64 {
        match self {
            IndexSet::Bits { lo, words } => w
                .checked_sub(*lo)
                .and_then(|i| words.get(i))
                .copied()
                .unwrap_or(0),
            IndexSet::Blocks(_) => unreachable!("word of a block list"),
        }
    }

    /// The words a bitmap holds, `lo..hi` (absolute).
    fn span(&self) -> (usize, usize) {
        match self {
            IndexSet::Bits { lo, words } => (*lo, lo + words.len()),
            IndexSet::Blocks(_) => (0, 0),
        }
    }
}

/// The words two bitmaps both hold (`lo >= hi` when none).
fn common(a: &IndexSet, b: &IndexSet) -> (usize, usize) {
    let ((l1, h1), (l2, h2)) = (a.span(), b.span());
    let lo = l1.max(l2);
    (lo, h1.min(h2).max(lo))
}

/// Sets bits `lo..hi`.
fn set_range(words: &mut [u64], lo: u64, hi: u64) {
    let (mut w, last) = ((lo / 64) as usize, ((hi - 1) / 64) as usize);
    let mut from = lo % 64;
    while w <= last {
        let to = if w == last { (hi - 1) % 64 + 1 } else { 64 };
        let mask = if to - from == 64 {
            u64::MAX
        } else {
            ((1u64 << (to - from)) - 1) << from
        };
        words[w] |= mask;
        from = 0;
        w += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn axis_of(s: &BTreeSet<u64>) -> Axis {
        Axis::from_sorted_indices(&s.iter().copied().collect::<Vec<_>>()).unwrap()
    }

    proptest! {
        #[test]
        fn bitmaps_answer_as_block_lists(a in prop::collection::btree_set(0..300u64, 0..120),
                                         b in prop::collection::btree_set(0..300u64, 0..120),
                                         len in 300..400u64) {
            let (x, y) = (axis_of(&a), axis_of(&b));
            let (bx, by) = (IndexSet::new(&x, len), IndexSet::new(&y, len));
            let is_bits = matches!(bx, IndexSet::Bits { .. });
            prop_assert!(is_bits);
            prop_assert_eq!(bx.to_axis(), x.clone());
            prop_assert_eq!(bx.overlap(&by), overlap(&x, &y));
            prop_assert_eq!(bx.contains(&by), contains(&x, &y));
            prop_assert_eq!(bx.intersect(&by).to_axis(), intersect(&x, &y));
            prop_assert_eq!(bx.subtract(&by).to_axis(), subtract(&x, &y));
            prop_assert_eq!(bx.is_empty(), a.is_empty());
            prop_assert_eq!(bx.len(), a.len() as u64);
            let blocks = IndexSet::Blocks(x.clone());
            for at in [0u64, 1, 63, 64, 65, 150, 299, 300, 301, 399] {
                for within in [1u64, 2, 7, 64, 130, 1000] {
                    let below = a.range(at.saturating_sub(within)..at).next_back().copied();
                    let from = a.range(at..at + within).next().copied();
                    for set in [&bx, &blocks] {
                        prop_assert_eq!(set.nearest_below(at, within), below, "{} {}", at, within);
                        prop_assert_eq!(set.nearest_from(at, within), from, "{} {}", at, within);
                    }
                }
            }
            // A long axis keeps block lists, borrowed by the block algebra, never
            // copied; block lists on both sides and mixed operands, either way round,
            // answer the same.
            let (lx, ly) = (IndexSet::new(&x, MAX_BITS + 1), IndexSet::new(&y, MAX_BITS + 1));
            prop_assert!(matches!(ly, IndexSet::Blocks(_)));
            prop_assert!(matches!(ly.blocks(), Cow::Borrowed(_)));
            prop_assert_eq!(lx.blocks().into_owned(), x.clone());
            for (p, q) in [(&lx, &ly), (&bx, &ly), (&lx, &by)] {
                prop_assert_eq!(p.overlap(q), overlap(&x, &y));
                prop_assert_eq!(p.contains(q), contains(&x, &y));
                prop_assert_eq!(p.intersect(q).to_axis(), intersect(&x, &y));
                prop_assert_eq!(p.subtract(q).to_axis(), subtract(&x, &y));
            }
            prop_assert_eq!(lx.is_empty(), a.is_empty());
            prop_assert_eq!(lx.len(), a.len() as u64);
        }
    }

    #[test]
    fn full_words_and_edges() {
        let a = Axis {
            blocks: vec![(0, 64), (64, 1), (127, 130), (300, 1)],
        };
        let s = IndexSet::new(&a, 301);
        assert_eq!(
            s.to_axis(),
            Axis {
                blocks: vec![(0, 65), (127, 130), (300, 1)]
            }
        );
    }
}
