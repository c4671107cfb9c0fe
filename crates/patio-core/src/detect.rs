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
//! Cost is O(w·n): only vector lengths whose first delta recurs are extended, each
//! extension is bounded by the covered length, and the search stops once a candidate
//! covers a whole window.

use crate::tree::{Body, Node, PatternSeq, Piece};
use crate::unit::Shape;

/// Default search window: delta vectors of up to this many elements are found.
pub const DEFAULT_WINDOW: usize = 32;

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
        let mut start = 0;
        for i in 1..=xs.len() {
            let boundary = i == xs.len() || xs[i].checked_sub(xs[i - 1]).is_none();
            if boundary {
                self.detect_run(&xs[start..i], &mut out);
                start = i;
            }
        }
        out
    }

    /// Detection over a run whose consecutive deltas all fit in `i64`.
    fn detect_run(&self, xs: &[i64], out: &mut Vec<Piece>) {
        let n = xs.len();
        if n == 0 {
            return;
        }
        let deltas: Vec<i64> = xs.windows(2).map(|p| p[1] - p[0]).collect();
        let mut literal_start = 0;
        let mut p = 0;
        while p < n {
            match self.best_unit_at(&deltas, p) {
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
                }
                None => p += 1,
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
    fn best_unit_at(&self, deltas: &[i64], p: usize) -> Option<(usize, u64)> {
        let tail = &deltas[p..];
        let max_k = self.window.min(tail.len() / 2);
        let first = *tail.first()?;
        let mut best: Option<(usize, u64)> = None;
        let mut best_cover = 0usize;
        // Only a vector length k with tail[k] == tail[0] can repeat back to back.
        for k in (1..=max_k).filter(|&k| tail[k] == first) {
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
}
