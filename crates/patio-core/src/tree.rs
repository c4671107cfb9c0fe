//! Pattern trees: nested repetition (kd-strided patterns) and [`PatternSeq`], the
//! compressed form of a whole sequence that answers element and search queries
//! without expanding anything.
//!
//! A [`Body`] is either a flat [`Shape`] or `outer × inner`: the inner body repeated at
//! every element offset of the outer body. `[1000, (100)^49 × (8)^3]` is 50 rows of
//! four values 8 apart, the rows 100 apart. The tree is built by running the detector
//! again over the first values of consecutive nodes that share a body (section 4.2 of
//! the pattern-PLFS paper), until nothing more nests.

use crate::detect::Detector;
use crate::unit::{PatternUnit, Shape};

/// How deep the tree may nest; real programs rarely exceed 4 loop levels.
const MAX_DEPTH: usize = 8;

/// The shape of a (possibly nested) pattern, without its first value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Body {
    Flat(Shape),
    /// `(outer, inner)`: one copy of `inner` at each element offset of `outer`.
    Nested(Box<Body>, Box<Body>),
}

impl Body {
    pub fn nested(outer: Body, inner: Body) -> Body {
        Body::Nested(Box::new(outer), Box::new(inner))
    }

    /// Number of elements described.
    pub fn len(&self) -> u64 {
        match self {
            Body::Flat(s) => s.len(),
            Body::Nested(o, i) => o.len() * i.len(),
        }
    }

    /// Never true: a body has at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Nesting depth: 1 for a flat shape.
    pub fn depth(&self) -> usize {
        match self {
            Body::Flat(_) => 1,
            Body::Nested(o, i) => o.depth() + i.depth(),
        }
    }

    /// Total number of deltas stored (a measure of description size).
    pub fn delta_count(&self) -> usize {
        match self {
            Body::Flat(s) => s.deltas().len(),
            Body::Nested(o, i) => o.delta_count() + i.delta_count(),
        }
    }

    /// Appends every element of a copy of this body starting at `base`, in order: the
    /// deltas added one after another (wrapping, as `Node::get` truncates), O(1) per
    /// element. The caller bounds `len()`.
    pub fn expand_into(&self, base: i64, out: &mut Vec<i64>) {
        match self {
            Body::Flat(s) => {
                out.push(base);
                if s.deltas().is_empty() {
                    return;
                }
                let mut v = base;
                for _ in 0..s.reps() {
                    for &d in s.deltas() {
                        v = v.wrapping_add(d);
                        out.push(v);
                    }
                }
            }
            Body::Nested(o, i) => {
                let mut starts = Vec::with_capacity(o.len() as usize);
                o.expand_into(base, &mut starts);
                for s in starts {
                    i.expand_into(s, out);
                }
            }
        }
    }

    /// Offset of element `i` from the first element. O(k) per level.
    #[inline]
    pub fn offset_of(&self, i: u64) -> i128 {
        match self {
            Body::Flat(s) => s.offset_of(i),
            Body::Nested(..) => self.nested_offset_of(i),
        }
    }

    fn nested_offset_of(&self, i: u64) -> i128 {
        match self {
            Body::Flat(s) => s.offset_of(i),
            Body::Nested(o, inner) => {
                let n = inner.len();
                o.offset_of(i / n) + inner.offset_of(i % n)
            }
        }
    }

    pub fn last_offset(&self) -> i128 {
        self.offset_of(self.len() - 1)
    }

    /// Smallest difference between consecutive elements, `None` for one element.
    pub fn min_step(&self) -> Option<i128> {
        match self {
            Body::Flat(s) => s.deltas().iter().map(|&d| d as i128).min(),
            Body::Nested(o, i) => {
                let between = o.min_step().map(|step| step - i.last_offset());
                match (i.min_step(), between) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    /// True when the described values never decrease.
    pub fn is_non_decreasing(&self) -> bool {
        self.min_step().is_none_or(|s| s >= 0)
    }

    /// Position of the largest element whose offset is ≤ `x`; the body must be
    /// non-decreasing. `None` when `x < 0`.
    #[inline]
    pub fn position_at_or_below(&self, x: i128) -> Option<u64> {
        match self {
            Body::Flat(s) => s.position_at_or_below(x),
            Body::Nested(..) => self.nested_position_at_or_below(x),
        }
    }

    /// The body as runs of one stride, in element order, without expanding the runs:
    /// `(position of the run's first element, its offset from the body's first
    /// element, stride, count)`. `None` when an innermost shape has more than one
    /// delta (its elements are not one stride), or when the runs would number more
    /// than `max_runs`.
    pub fn flat_runs(&self, max_runs: usize) -> Option<Vec<(u64, i128, i64, u64)>> {
        match self {
            Body::Flat(s) => match s.deltas() {
                [] => Some(vec![(0, 0, 0, 1)]),
                [d] => Some(vec![(0, 0, *d, s.len())]),
                _ => None,
            },
            Body::Nested(o, inner) => {
                let runs = inner.flat_runs(max_runs)?;
                let copies = usize::try_from(o.len()).ok()?;
                if copies.checked_mul(runs.len())? > max_runs {
                    return None;
                }
                let n = inner.len();
                let mut out = Vec::with_capacity(copies * runs.len());
                for c in 0..o.len() {
                    let base = o.offset_of(c);
                    for &(pos, off, stride, count) in &runs {
                        out.push((c * n + pos, base + off, stride, count));
                    }
                }
                Some(out)
            }
        }
    }

    /// `(start, len)`: the positions of the innermost one-stride run that holds element
    /// `i` (`i < len()`), or `None` when that run's shape has more than one delta.
    pub fn inner_run(&self, i: u64) -> Option<(u64, u64)> {
        match self {
            Body::Flat(s) => (s.deltas().len() <= 1).then(|| (0, s.len())),
            Body::Nested(_, inner) => {
                let n = inner.len();
                let (start, len) = inner.inner_run(i % n)?;
                Some((i - i % n + start, len))
            }
        }
    }

    fn nested_position_at_or_below(&self, x: i128) -> Option<u64> {
        match self {
            Body::Flat(s) => s.position_at_or_below(x),
            Body::Nested(o, inner) => {
                let row = o.position_at_or_below(x)?;
                let col = inner.position_at_or_below(x - o.offset_of(row))?;
                Some(row * inner.len() + col)
            }
        }
    }
}

impl std::fmt::Display for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Flat(s) => write!(f, "{s}"),
            Body::Nested(o, i) => write!(f, "{o} × {i}"),
        }
    }
}

/// A pattern with its first value: `[init, body]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub init: i64,
    pub body: Body,
}

impl Node {
    pub fn new(init: i64, body: Body) -> Self {
        Node { init, body }
    }

    pub fn len(&self) -> u64 {
        self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Element `i`; `i` must be `< len()`. Elements always fit in `i64` because a
    /// node is only built over real values.
    #[inline]
    pub fn get(&self, i: u64) -> i64 {
        (self.init as i128 + self.body.offset_of(i)) as i64
    }

    pub fn last(&self) -> i64 {
        self.get(self.len() - 1)
    }

    /// The node as a plain pattern unit when it is not nested.
    pub fn as_unit(&self) -> Option<PatternUnit> {
        match &self.body {
            Body::Flat(s) => Some(PatternUnit::from_parts(self.init, s.clone())),
            Body::Nested(..) => None,
        }
    }
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}]", self.init, self.body)
    }
}

/// One ordered piece of a detected sequence: a pattern or values that did not compress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Piece {
    Node(Node),
    Literal(Vec<i64>),
}

impl Piece {
    pub fn len(&self) -> u64 {
        match self {
            Piece::Node(n) => n.len(),
            Piece::Literal(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: u64) -> i64 {
        match self {
            Piece::Node(n) => n.get(i),
            Piece::Literal(v) => v[i as usize],
        }
    }

    pub fn first(&self) -> i64 {
        self.get(0)
    }

    pub fn last(&self) -> i64 {
        self.get(self.len() - 1)
    }

    /// Position of the largest element ≤ `x` in a non-decreasing piece.
    pub fn position_at_or_below(&self, x: i64) -> Option<u64> {
        match self {
            Piece::Node(n) => n.body.position_at_or_below(x as i128 - n.init as i128),
            Piece::Literal(v) => v
                .partition_point(|&e| e <= x)
                .checked_sub(1)
                .map(|p| p as u64),
        }
    }
}

impl std::fmt::Display for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Piece::Node(n) => write!(f, "{n}"),
            Piece::Literal(v) if v.len() <= 4 => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "{}", parts.join(", "))
            }
            Piece::Literal(v) => write!(f, "<{} literals>", v.len()),
        }
    }
}

/// Expands pieces back into the values they describe.
pub fn expand_pieces(pieces: &[Piece]) -> Vec<i64> {
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len() as usize).sum());
    for p in pieces {
        match p {
            Piece::Node(n) => n.body.expand_into(n.init, &mut out),
            Piece::Literal(v) => out.extend_from_slice(v),
        }
    }
    out
}

/// Nests consecutive nodes that share a body and whose first values form a pattern,
/// repeatedly, until nothing changes.
pub fn nest(mut pieces: Vec<Piece>, detector: &Detector) -> Vec<Piece> {
    for _ in 0..MAX_DEPTH {
        let mut changed = false;
        let mut out = Vec::with_capacity(pieces.len());
        let mut i = 0;
        while i < pieces.len() {
            let Piece::Node(first) = &pieces[i] else {
                out.push(pieces[i].clone());
                i += 1;
                continue;
            };
            let mut j = i + 1;
            while matches!(&pieces.get(j), Some(Piece::Node(n)) if n.body == first.body) {
                j += 1;
            }
            if j - i < 2 {
                out.push(pieces[i].clone());
                i += 1;
                continue;
            }
            let inits: Vec<i64> = pieces[i..j].iter().map(Piece::first).collect();
            for outer in detector.detect(&inits) {
                match outer {
                    Piece::Node(o) => {
                        changed = true;
                        out.push(Piece::Node(Node::new(
                            o.init,
                            Body::nested(o.body, first.body.clone()),
                        )));
                    }
                    // Two or three copies evenly spaced (too few for a unit of their
                    // own): one nested node costs no more than the copies.
                    Piece::Literal(vals) if evenly_spaced(&vals) => {
                        changed = true;
                        let outer = Shape::new(vec![vals[1] - vals[0]], vals.len() as u64 - 1);
                        out.push(Piece::Node(Node::new(
                            vals[0],
                            Body::nested(Body::Flat(outer), first.body.clone()),
                        )));
                    }
                    Piece::Literal(vals) => out.extend(
                        vals.into_iter()
                            .map(|v| Piece::Node(Node::new(v, first.body.clone()))),
                    ),
                }
            }
            i = j;
        }
        pieces = out;
        if !changed {
            break;
        }
    }
    pieces
}

/// At least two values, all the same (non-overflowing) distance apart.
fn evenly_spaced(values: &[i64]) -> bool {
    values.len() >= 2
        && values
            .windows(2)
            .all(|w| w[1].checked_sub(w[0]) == Some(values[1].wrapping_sub(values[0])))
}

/// A whole sequence in compressed form: ordered pieces plus the index of each
/// piece's first element. Random access is a binary search over pieces plus O(k)
/// per nesting level; search (`position_at_or_below`) needs a sorted sequence.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PatternSeq {
    pieces: Vec<Piece>,
    starts: Vec<u64>,
    len: u64,
}

impl PatternSeq {
    /// Detects patterns in `xs` and nests them.
    pub fn build(xs: &[i64], detector: &Detector) -> Self {
        Self::from_pieces(nest(detector.detect(xs), detector))
    }

    pub fn from_pieces(pieces: Vec<Piece>) -> Self {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0u64;
        for p in &pieces {
            starts.push(len);
            len += p.len();
        }
        PatternSeq {
            pieces,
            starts,
            len,
        }
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the piece holding element `i` and `i`'s position inside it.
    #[inline]
    fn locate(&self, i: u64) -> (usize, u64) {
        if self.pieces.len() == 1 {
            return (0, i);
        }
        let piece = self.starts.partition_point(|&s| s <= i) - 1;
        (piece, i - self.starts[piece])
    }

    /// Element `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: u64) -> Option<i64> {
        if i >= self.len {
            return None;
        }
        let (p, at) = self.locate(i);
        Some(self.pieces[p].get(at))
    }

    /// Position of the largest element ≤ `x`; the sequence must be non-decreasing.
    pub fn position_at_or_below(&self, x: i64) -> Option<u64> {
        let p = self.pieces.partition_point(|piece| piece.first() <= x);
        let p = p.checked_sub(1)?;
        let at = self.pieces[p].position_at_or_below(x)?;
        Some(self.starts[p] + at)
    }

    /// Share of elements covered by pattern nodes rather than literals.
    pub fn coverage(&self) -> f64 {
        if self.len == 0 {
            return 1.0;
        }
        let covered: u64 = self
            .pieces
            .iter()
            .filter(|p| matches!(p, Piece::Node(_)))
            .map(Piece::len)
            .sum();
        covered as f64 / self.len as f64
    }

    pub fn expand(&self) -> Vec<i64> {
        expand_pieces(&self.pieces)
    }

    /// Approximate bytes held in memory (pieces, deltas, literals, index).
    pub fn mem_bytes(&self) -> usize {
        fn body_bytes(b: &Body) -> usize {
            match b {
                Body::Flat(s) => std::mem::size_of::<Shape>() + s.deltas().len() * 8 * 2 + 16,
                Body::Nested(o, i) => 16 + body_bytes(o) + body_bytes(i),
            }
        }
        let pieces: usize = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Node(n) => std::mem::size_of::<Piece>() + body_bytes(&n.body),
                Piece::Literal(v) => std::mem::size_of::<Piece>() + v.len() * 8,
            })
            .sum();
        std::mem::size_of::<Self>() + pieces + self.starts.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_d_strided_nests_into_one_node() {
        // 6 planes × 40 rows × 50 columns: rows too long for the window, so the
        // tree has to do the nesting.
        let xs: Vec<i64> = (0..6)
            .flat_map(|p| {
                (0..40).flat_map(move |r| (0..50).map(move |c| p * 1_000_000 + r * 1000 + c * 4))
            })
            .collect();
        let seq = PatternSeq::build(&xs, &Detector::new(8));
        assert_eq!(seq.pieces().len(), 1, "{:?}", seq.pieces());
        assert_eq!(
            seq.pieces()[0].to_string(),
            "[0, (1000000)^5 × (1000)^39 × (4)^49]"
        );
        assert_eq!(seq.expand(), xs);
        for (i, &x) in xs.iter().enumerate().step_by(7) {
            assert_eq!(seq.get(i as u64), Some(x));
            assert_eq!(seq.position_at_or_below(x), Some(i as u64));
            assert_eq!(seq.position_at_or_below(x + 1), Some(i as u64));
        }
        assert_eq!(seq.position_at_or_below(-1), None);
    }

    /// Expands `flat_runs` (and checks `inner_run` at every element) against the body.
    fn check_runs(body: &Body) {
        let mut xs = Vec::new();
        body.expand_into(0, &mut xs);
        let runs = body
            .flat_runs(usize::MAX)
            .expect("one-stride innermost shapes");
        let mut from_runs = Vec::new();
        for &(pos, off, stride, count) in &runs {
            assert_eq!(pos, from_runs.len() as u64);
            for k in 0..count {
                from_runs.push((off + k as i128 * stride as i128) as i64);
            }
            for k in 0..count {
                assert_eq!(body.inner_run(pos + k), Some((pos, count)));
            }
        }
        assert_eq!(from_runs, xs);
        if matches!(body, Body::Nested(..)) {
            assert_eq!(body.flat_runs(runs.len() - 1), None);
        }
    }

    #[test]
    fn flat_runs_match_the_expansion() {
        let detector = Detector::new(8);
        for dims in [(1, 1, 5), (3, 4, 1), (2, 40, 50), (6, 3, 2)] {
            let xs: Vec<i64> = (0..dims.0)
                .flat_map(|p| {
                    (0..dims.1).flat_map(move |r| {
                        (0..dims.2).map(move |c| p * 1_000_000 - r * 1000 + c * 4)
                    })
                })
                .collect();
            for piece in PatternSeq::build(&xs, &detector).pieces() {
                if let Piece::Node(n) = piece {
                    check_runs(&n.body);
                }
            }
        }
        let two_deltas = Body::Flat(Shape::new(vec![4, 8], 3));
        assert_eq!(two_deltas.flat_runs(100), None);
        assert_eq!(two_deltas.inner_run(2), None);
    }
}
