//! The offline pattern detector: the sliding-window algorithm over deltas
//! (Algorithm 1 of the pattern-PLFS paper, LZ77-like).
//!
//! At each position the detector looks for the delta vector of length `k ≤ w` (the
//! search window) that repeats back to back right there, extends it as far as it keeps
//! repeating, and keeps the candidate covering the most elements (the smallest `k` on
//! ties). Elements no candidate covers become literal runs. A unit must be worth
//! storing: `k·(r-1) ≥ 2`, i.e. at least four elements for a stride and two full
//! repetitions for a longer vector.
//!
//! Row completion: a unit with `k ≥ 2` deltas stops one delta short of finishing
//! another row when its sequence is a 2-D (or 3-D, …) array: the last row lacks the
//! closing gap. When the next `k-1` deltas continue the vector and one row's `k`
//! elements are themselves a pattern, the detector emits a nested node instead — that
//! row repeated — so a whole kd-strided sequence is one entry. A row that is neither a
//! constant stride nor a pattern by itself (`0, 3, 7` of `[0, (3, 4, 7)^r]`) keeps the
//! flat unit.
//!
//! Cost is O(w·n) at worst and O(n) expected on input whose deltas seldom recur
//! (scattered indices): each delta is linked to the next equal delta within the window
//! (one hash table per block of deltas), only those vector lengths are tried, each
//! extension is bounded by the covered length, and the search stops once a candidate
//! covers a whole window.

use crate::tree::{Body, Node, PatternSeq, Piece};
use crate::unit::Shape;

/// Default search window: delta vectors of up to this many elements are found.
pub const DEFAULT_WINDOW: usize = 32;

/// Slots of the table that links equal deltas ([`Links`]): a power of two.
const LINK_BITS: u32 = 10;
const LINK_TABLE: usize = 1 << LINK_BITS;
/// Deltas linked at a time.
const LINK_BLOCK: usize = 1024;
/// Positions in a row without a unit before the deltas ahead are linked (until then,
/// and where a unit was just found, the window is scanned: structured input is mostly
/// skipped over by its units and never linked).
const LINK_AFTER_MISSES: usize = 16;
/// No equal delta within the window.
const NO_LINK: usize = usize::MAX;

/// The sliding-window detector with a configurable search window.
#[derive(Clone, Copy, Debug)]
pub struct Detector {
    window: usize,
}

impl Default for Detector {
    fn default() -> Self {
        Detector {
            window: DEFAULT_WINDOW,
        }
    }
}

impl Detector {
    /// A detector whose search window holds `window` deltas (at least 1).
    pub fn new(window: usize) -> Self {
        Detector {
            window: window.max(1),
        }
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// Splits `xs` into ordered pieces (pattern nodes and literal runs) whose
    /// concatenated expansion is exactly `xs`. Deltas that overflow `i64` (values at
    /// opposite ends of the range) are piece boundaries.
    pub fn detect(&self, xs: &[i64]) -> Vec<Piece> {
        let mut out = Vec::new();
        // deltas[i] = xs[i + 1] - xs[i]; where that overflows, a run ends at i + 1 (its
        // wrapped value belongs to no run).
        let mut ends = Vec::new();
        let deltas: Vec<i64> = xs
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let (d, overflow) = w[1].overflowing_sub(w[0]);
                if overflow {
                    ends.push(i + 1);
                }
                d
            })
            .collect();
        ends.push(xs.len());
        let mut start = 0;
        for end in ends {
            let run_deltas = &deltas[start.min(deltas.len())..end.saturating_sub(1).max(start)];
            self.detect_run(&xs[start..end], run_deltas, &mut out);
            start = end;
        }
        out
    }

    /// Detection over a run whose consecutive deltas all fit in `i64` (`deltas`).
    fn detect_run(&self, xs: &[i64], deltas: &[i64], out: &mut Vec<Piece>) {
        let n = xs.len();
        if n == 0 {
            return;
        }
        let mut links = Links::new(deltas, self.window);
        let mut literal_start = 0;
        let mut p = 0;
        while p < n {
            match self.best_unit_at(deltas, &mut links, p) {
                Some((k, reps)) => {
                    push_literal(out, &xs[literal_start..p]);
                    let covered_end = p + k * reps as usize; // index of the unit's last element
                    let vector = &deltas[p..p + k];
                    let continues = k >= 2
                        && covered_end + k - 1 < n
                        && deltas[covered_end..covered_end + k - 1] == vector[..k - 1];
                    let row = continues.then(|| self.row_body(&xs[p..p + k])).flatten();
                    if let Some(row) = row {
                        let stride = vector.iter().map(|&d| d as i128).sum::<i128>();
                        // The row stride fits: it is the distance between two real elements.
                        let outer = Shape::new(vec![stride as i64], reps);
                        out.push(Piece::Node(Node::new(
                            xs[p],
                            Body::nested(Body::Flat(outer), row),
                        )));
                        p = covered_end + k;
                    } else {
                        out.push(Piece::Node(Node::new(
                            xs[p],
                            Body::Flat(Shape::new(vector.to_vec(), reps)),
                        )));
                        p = covered_end + 1;
                    }
                    literal_start = p;
                    links.misses = 0;
                }
                None => {
                    links.misses += 1;
                    p = links.candidate_from(p + 1);
                }
            }
        }
        push_literal(out, &xs[literal_start..n]);
    }

    /// The body of one row when the row is a constant stride (of any length) or its
    /// elements are otherwise one pattern node.
    fn row_body(&self, row: &[i64]) -> Option<Body> {
        let deltas: Vec<i64> = row.windows(2).map(|w| w[1] - w[0]).collect();
        let strided = minimal_shape(&deltas);
        if strided.deltas().len() == 1 {
            return Some(Body::Flat(strided));
        }
        match PatternSeq::build(row, self).pieces() {
            [Piece::Node(node)] => Some(node.body.clone()),
            _ => None,
        }
    }

    /// The best `(k, reps)` for a unit starting at element `p`, if any is worth it.
    /// `links` are `deltas`' for this window.
    fn best_unit_at(&self, deltas: &[i64], links: &mut Links, p: usize) -> Option<(usize, u64)> {
        let tail = deltas.get(p..).filter(|t| !t.is_empty())?;
        let max_k = self.window.min(tail.len() / 2);
        let mut best: Option<(usize, u64)> = None;
        let mut best_cover = 0usize;
        // Only a vector length k with tail[k] == tail[0] can repeat back to back: the
        // positions of the deltas equal to tail[0], in increasing order.
        let mut next = links.next(p);
        while next != NO_LINK && next - p <= max_k {
            let k = next - p;
            next = links.next(next);
            // Length of the repetition: j ≥ k with tail[j] == tail[j-k].
            let matched = 1 + tail[k + 1..]
                .iter()
                .zip(&tail[1..])
                .take_while(|(a, b)| a == b)
                .count();
            let reps = 1 + matched / k;
            let cover = k * reps;
            if k * (reps - 1) >= 2 && cover > best_cover {
                best = Some((k, reps as u64));
                best_cover = cover;
                // A unit covering a whole window (or the rest of the input) is kept:
                // a longer vector could only win by covering even more.
                if best_cover >= self.window || best_cover == tail.len() {
                    break;
                }
            }
        }
        best
    }
}

/// For each delta, the index of the next equal delta at most `window` positions on
/// ([`NO_LINK`] when there is none). Following the links from `p` lists, in increasing
/// order, every `p + k` (`k ≤ window`) with `deltas[p + k] == deltas[p]`: a later equal
/// delta more than `window` past a linked one is more than `window` past `p` too.
///
/// Where the detector finds units, a position's link is found by scanning the window.
/// Once it has met [`LINK_AFTER_MISSES`] positions in a row without one (scattered
/// values), the deltas ahead are linked a block at a time, in one backward pass (over
/// the block and the window after it) through a small table that holds, per hash of a
/// delta, the nearest position after the current one whose delta has that hash: when
/// it is beyond the window no equal delta is within it; when it holds an equal delta
/// that is the nearest one; only when it holds a different delta (a collision, rare
/// with the table many times the window) is the rest of the window scanned. O(n) for
/// scattered input, O(w·n) at worst.
struct Links<'a> {
    deltas: &'a [i64],
    window: usize,
    /// Per position its link, [`UNLINKED`] until its block is linked (empty until the
    /// first block is).
    links: Vec<usize>,
    /// Positions in a row where the detector found no unit.
    misses: usize,
}

/// A position whose block is not linked yet.
const UNLINKED: usize = usize::MAX - 1;

impl<'a> Links<'a> {
    fn new(deltas: &'a [i64], window: usize) -> Self {
        Links {
            deltas,
            window,
            links: Vec::new(),
            misses: 0,
        }
    }

    /// The next equal delta after position `p` (< `deltas.len()`) within the window.
    fn next(&mut self, p: usize) -> usize {
        if self.misses >= LINK_AFTER_MISSES {
            self.candidate_from(p);
        }
        match self.links.get(p) {
            Some(&link) if link != UNLINKED => link,
            _ => {
                let (d, v) = (self.deltas, self.deltas[p]);
                let last = (p + self.window).min(d.len() - 1);
                (p + 1..=last).find(|&k| d[k] == v).unwrap_or(NO_LINK)
            }
        }
    }

    /// The first position from `p` on where a unit can start: `p` while the window is
    /// scanned, else the first position linked to an equal delta (no vector length can
    /// repeat at the others), `deltas.len()` when there is none.
    fn candidate_from(&mut self, mut p: usize) -> usize {
        if self.misses < LINK_AFTER_MISSES {
            return p;
        }
        if self.links.is_empty() {
            self.links = vec![UNLINKED; self.deltas.len()];
        }
        while p < self.deltas.len() {
            if self.links[p] == UNLINKED {
                self.link_block(p);
            }
            if self.links[p] != NO_LINK {
                return p;
            }
            p += 1;
        }
        p
    }

    /// Links the positions from `start` to the end of its block.
    fn link_block(&mut self, start: usize) {
        let (deltas, window) = (self.deltas, self.window);
        let m = deltas.len();
        let end = (start + LINK_BLOCK).min(m);
        let mut nearest = [NO_LINK; LINK_TABLE];
        for i in (start..end.saturating_add(window).min(m)).rev() {
            let v = deltas[i];
            let slot =
                ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - LINK_BITS)) as usize;
            let j = nearest[slot];
            nearest[slot] = i;
            if i >= end {
                continue;
            }
            self.links[i] = if j == NO_LINK || j - i > window {
                NO_LINK
            } else if deltas[j] == v {
                j
            } else {
                // Every delta between i and j hashes elsewhere: an equal one lies past j.
                let last = (i + window).min(m - 1);
                (j + 1..=last).find(|&k| deltas[k] == v).unwrap_or(NO_LINK)
            };
        }
    }
}

/// The shortest shape `(v)^m` that spells out the delta vector `deltas` exactly.
pub(crate) fn minimal_shape(deltas: &[i64]) -> Shape {
    let len = deltas.len();
    for period in 1..=len {
        if len.is_multiple_of(period) && deltas.chunks(period).all(|c| c == &deltas[..period]) {
            return Shape::new(deltas[..period].to_vec(), (len / period) as u64);
        }
    }
    Shape::new(deltas.to_vec(), 1)
}

fn push_literal(out: &mut Vec<Piece>, values: &[i64]) {
    if values.is_empty() {
        return;
    }
    if let Some(Piece::Literal(prev)) = out.last_mut() {
        prev.extend_from_slice(values);
    } else {
        out.push(Piece::Literal(values.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::expand_pieces;
    use proptest::prelude::*;

    fn describe(pieces: &[Piece]) -> Vec<String> {
        pieces.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn paper_figure_8() {
        let xs = [0, 3, 7, 14, 17, 21, 28, 31, 35, 42, 46, 50, 54, 58];
        let pieces = Detector::default().detect(&xs);
        assert_eq!(describe(&pieces), ["[0, (3, 4, 7)^3]", "[46, (4)^3]"]);
        assert_eq!(expand_pieces(&pieces), xs);
    }

    #[test]
    fn two_d_strided_is_one_nested_entry() {
        let xs: Vec<i64> = (0..50)
            .flat_map(|i| (0..4).map(move |j| 1000 + i * 100 + j * 8))
            .collect();
        let pieces = Detector::default().detect(&xs);
        assert_eq!(pieces.len(), 1, "{:?}", describe(&pieces));
        assert_eq!(expand_pieces(&pieces), xs);
        assert_eq!(pieces[0].to_string(), "[1000, (100)^49 × (8)^3]");
    }

    #[test]
    fn edge_cases() {
        let d = Detector::new(4);
        assert!(d.detect(&[]).is_empty());
        assert_eq!(describe(&d.detect(&[7])), ["7"]);
        assert_eq!(describe(&d.detect(&[5, 5, 5, 5])), ["[5, (0)^3]"]);
        assert_eq!(describe(&d.detect(&[9, 6, 3, 0, -3])), ["[9, (-3)^4]"]);
        let extremes = [i64::MIN, i64::MAX, i64::MIN, 0, 1, 2, 3];
        let pieces = d.detect(&extremes);
        assert_eq!(expand_pieces(&pieces), extremes);
    }

    /// The search before delta links: every vector length `k ≤ window` whose first
    /// delta recurs at `k`, found by comparing each one (the reference model).
    fn best_unit_by_scan(window: usize, deltas: &[i64], p: usize) -> Option<(usize, u64)> {
        let tail = deltas.get(p..).filter(|t| !t.is_empty())?;
        let max_k = window.min(tail.len() / 2);
        let mut best = None;
        let mut best_cover = 0usize;
        for k in (1..=max_k).filter(|&k| tail[k] == tail[0]) {
            let matched = 1
                + (k + 1..tail.len())
                    .take_while(|&j| tail[j] == tail[j - k])
                    .count();
            let reps = 1 + matched / k;
            if k * (reps - 1) >= 2 && k * reps > best_cover {
                best = Some((k, reps as u64));
                best_cover = k * reps;
                if best_cover >= window || best_cover == tail.len() {
                    break;
                }
            }
        }
        best
    }

    /// Deltas from a few values (many recur), from a wide range (few do), or a mix of
    /// runs of both; lengths across the link tables' block boundary.
    fn deltas_strategy() -> impl Strategy<Value = Vec<i64>> {
        prop_oneof![
            prop::collection::vec(-3i64..4, 0..300),
            prop::collection::vec(1i64..1_000_000, 0..300),
            prop::collection::vec(prop_oneof![Just(7i64), 1i64..40, any::<i64>()], 0..300),
            (1usize..4, 4000usize..4400)
                .prop_map(|(m, n)| { (0..n as i64).map(|i| (i * 7919 % 13) * m as i64).collect() }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Links list exactly the equal deltas within the window, and the linked
        /// search finds the scan's unit at every position.
        #[test]
        fn linked_search_equals_the_scan(
            deltas in deltas_strategy(),
            window in prop_oneof![1usize..40, 1000usize..1300],
            first in any::<prop::sample::Index>(),
        ) {
            // Scanned (no misses yet) and linked in blocks (from an arbitrary first
            // position on, then every other).
            for misses in [0, LINK_AFTER_MISSES] {
                let mut links = Links::new(&deltas, window);
                links.misses = misses;
                let start = if deltas.is_empty() { 0 } else { first.index(deltas.len()) };
                for i in (start..deltas.len()).chain(0..start) {
                    let j = links.next(i);
                    let want = (i + 1..deltas.len().min(i + window + 1))
                        .find(|&j| deltas[j] == deltas[i]);
                    prop_assert_eq!((j != NO_LINK).then_some(j), want, "link of {}", i);
                }
                // Skipped positions have no equal delta within the window, hence no unit.
                let mut links = Links::new(&deltas, window);
                links.misses = misses;
                for p in 0..=deltas.len() {
                    let q = links.candidate_from(p);
                    prop_assert!(q >= p && q <= deltas.len().max(p));
                    for r in p..q {
                        prop_assert!(!(r + 1..deltas.len().min(r + window + 1)).any(|j| deltas[j] == deltas[r]));
                    }
                }
                let d = Detector::new(window);
                let mut links = Links::new(&deltas, window);
                links.misses = misses;
                for p in 0..=deltas.len() {
                    prop_assert_eq!(
                        d.best_unit_at(&deltas, &mut links, p),
                        best_unit_by_scan(window, &deltas, p),
                        "position {}", p
                    );
                }
            }
        }

        /// Sorted scattered indices (a point read's linear indices): the sequence and
        /// its encoding give back the indices.
        #[test]
        fn scattered_indices_round_trip(
            mut xs in prop::collection::vec(0i64..1 << 24, 0..3000),
            window in prop_oneof![Just(DEFAULT_WINDOW), 1usize..40],
        ) {
            xs.sort_unstable();
            xs.dedup();
            let seq = PatternSeq::build(&xs, &Detector::new(window));
            prop_assert_eq!(seq.expand(), xs.clone());
            let bytes = crate::seqcodec::encode_seq(&seq);
            prop_assert_eq!(crate::seqcodec::decode_seq(&bytes).unwrap().expand(), xs);
        }
    }
}
