//! Pattern unit `[init, (d0 … dk-1)^r]`: a first value followed by a delta vector
//! repeated `r` times.
//!
//! Element-count convention (used everywhere in patio): a unit with `k` deltas and
//! `r` repetitions describes exactly `1 + k·r` elements. `[5, (2, 3)^2]` is
//! `5, 7, 10, 12, 15`. A unit with no deltas (`k = 0`) or `r = 0` is a single element.
//!
//! Every question is answered from `init`, the deltas and their prefix sums, never
//! by expanding the unit. Arithmetic is done in `i128`, so values anywhere in the
//! `i64` range are exact; a unit is only ever built (by the detector or a decoder)
//! when all of its elements are representable as `i64`.

use crate::error::{CoreError, Result};
use strength_reduce::StrengthReducedU64;

/// A run of values described by a first value and a repeated delta vector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PatternUnit {
    init: i64,
    shape: Shape,
}

/// A unit without its first value: the delta vector and its repetition count.
/// Units with equal shapes differ only by where they start, which is what the
/// pattern tree and the shape dictionaries exploit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    deltas: Vec<i64>,
    reps: u64,
    /// `prefix[j]` = d0 + … + d(j-1); `prefix[k]` is the stride of one repetition.
    prefix: Vec<i128>,
    divider: StrideDivider,
}

/// Division by a positive stride, precomputed as a multiplication (lookups divide
/// by the same stride over and over). Derived from the deltas, so it never takes part
/// in comparisons or hashing.
#[derive(Clone, Copy, Debug)]
struct StrideDivider(Option<StrengthReducedU64>);

impl PartialEq for StrideDivider {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for StrideDivider {}
impl PartialOrd for StrideDivider {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for StrideDivider {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}
impl std::hash::Hash for StrideDivider {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Shape {
    /// A shape from its delta vector and repetition count. An empty delta vector
    /// or zero repetitions describe a single element.
    pub fn new(deltas: Vec<i64>, reps: u64) -> Self {
        let (deltas, reps) = if deltas.is_empty() || reps == 0 {
            (Vec::new(), 0)
        } else {
            (deltas, reps)
        };
        let mut prefix = Vec::with_capacity(deltas.len() + 1);
        let mut acc: i128 = 0;
        prefix.push(0);
        for &d in &deltas {
            acc += d as i128;
            prefix.push(acc);
        }
        let divider = StrideDivider(
            u64::try_from(acc)
                .ok()
                .filter(|&s| s > 0)
                .map(StrengthReducedU64::new),
        );
        Shape {
            deltas,
            reps,
            prefix,
            divider,
        }
    }

    /// A shape whose element count fits in `u64` and whose offsets stay within the
    /// span of `i64` values (2^64); `None` otherwise. Used for untrusted input.
    pub fn checked(deltas: Vec<i64>, reps: u64) -> Option<Self> {
        (deltas.len() as u64).checked_mul(reps)?.checked_add(1)?;
        let shape = Shape::new(deltas, reps);
        let span = (reps.saturating_sub(1) as i128).checked_mul(shape.stride())?;
        let within = |v: i128| v.abs() < (1i128 << 64);
        let fits = within(span)
            && within(span + shape.stride())
            && shape.prefix.iter().all(|&p| within(p));
        fits.then_some(shape)
    }

    /// The single-element shape.
    pub fn point() -> Self {
        Shape::new(Vec::new(), 0)
    }

    pub fn deltas(&self) -> &[i64] {
        &self.deltas
    }

    pub fn reps(&self) -> u64 {
        self.reps
    }

    /// Number of elements described: `1 + k·r`.
    pub fn len(&self) -> u64 {
        1 + self.deltas.len() as u64 * self.reps
    }

    /// Never true: a shape has at least one element. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sum of one repetition's deltas.
    #[inline]
    pub fn stride(&self) -> i128 {
        self.prefix[self.deltas.len()]
    }

    /// Offset of element `i` from the first element, in O(1) after the prefix sums.
    /// `i` must be `< len()`.
    #[inline]
    pub fn offset_of(&self, i: u64) -> i128 {
        match self.deltas.len() as u64 {
            0 => 0,
            // Strides are the common case: no division.
            1 => i as i128 * self.deltas[0] as i128,
            k => (i / k) as i128 * self.stride() + self.prefix[(i % k) as usize],
        }
    }

    /// Offset of the last element from the first.
    pub fn last_offset(&self) -> i128 {
        self.offset_of(self.len() - 1)
    }

    /// Smallest offset of any element from the first (≤ 0).
    pub fn min_offset(&self) -> i128 {
        self.extreme_offset(|a, b| a.min(b))
    }

    /// Largest offset of any element from the first (≥ 0).
    pub fn max_offset(&self) -> i128 {
        self.extreme_offset(|a, b| a.max(b))
    }

    fn extreme_offset(&self, pick: impl Fn(i128, i128) -> i128) -> i128 {
        // Within one repetition the extreme is at some prefix; across repetitions the
        // row offset is monotone, so the extreme lies in the first or the last row.
        let k = self.deltas.len();
        if k == 0 {
            return 0;
        }
        let last_row = (self.reps - 1) as i128 * self.stride();
        let mut best = 0i128;
        for j in 0..k {
            best = pick(best, self.prefix[j]);
            best = pick(best, last_row + self.prefix[j]);
        }
        pick(best, self.last_offset())
    }

    /// True when no delta is negative, so the described values never decrease.
    pub fn is_non_decreasing(&self) -> bool {
        self.deltas.iter().all(|&d| d >= 0)
    }

    /// Position of the largest element whose offset is ≤ `x` (offset from the first
    /// element), for non-decreasing shapes; `None` when `x < 0`. O(k).
    #[inline]
    pub fn position_at_or_below(&self, x: i128) -> Option<u64> {
        debug_assert!(self.is_non_decreasing());
        if x < 0 {
            return None;
        }
        let k = self.deltas.len() as u64;
        if k == 0 {
            return Some(0);
        }
        let stride = self.stride();
        if stride == 0 {
            // All deltas are zero: every element equals the first; the last one wins.
            return Some(self.len() - 1);
        }
        // x ≥ 0 and stride > 0 here: divide by multiplying with the precomputed inverse.
        let row = match (u64::try_from(x), self.divider.0) {
            (Ok(x), Some(divider)) => x / divider,
            _ => (x / stride).min(u64::MAX as i128) as u64,
        }
        .min(self.reps);
        if row == self.reps {
            return Some(self.len() - 1);
        }
        let rem = x - row as i128 * stride;
        // Largest column whose prefix is ≤ rem; prefixes are non-decreasing.
        let mut col = 0u64;
        for j in 1..k as usize {
            if self.prefix[j] <= rem {
                col = j as u64;
            } else {
                break;
            }
        }
        Some(row * k + col)
    }
}

impl PatternUnit {
    /// A unit from its parts. Fails when some element would leave the `i64` range.
    pub fn new(init: i64, deltas: Vec<i64>, reps: u64) -> Result<Self> {
        let shape = Shape::checked(deltas.clone(), reps).ok_or_else(|| {
            CoreError::Invalid(format!(
                "pattern unit [{init}, {deltas:?}^{reps}] is too long for 64 bits"
            ))
        })?;
        let unit = PatternUnit { init, shape };
        let lo = init as i128 + unit.shape.min_offset();
        let hi = init as i128 + unit.shape.max_offset();
        if lo < i64::MIN as i128 || hi > i64::MAX as i128 {
            return Err(CoreError::Invalid(format!(
                "pattern unit [{init}, {:?}^{}] leaves the 64-bit range",
                unit.shape.deltas, unit.shape.reps
            )));
        }
        Ok(unit)
    }

    /// A unit from a first value and a shape whose elements are known to fit.
    pub(crate) fn from_parts(init: i64, shape: Shape) -> Self {
        PatternUnit { init, shape }
    }

    /// A single value.
    pub fn point(value: i64) -> Self {
        PatternUnit {
            init: value,
            shape: Shape::point(),
        }
    }

    pub fn init(&self) -> i64 {
        self.init
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn deltas(&self) -> &[i64] {
        self.shape.deltas()
    }

    pub fn reps(&self) -> u64 {
        self.shape.reps()
    }

    /// Number of elements: `1 + k·r`.
    pub fn len(&self) -> u64 {
        self.shape.len()
    }

    /// Never true: a unit has at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Element `i` (0-based), or `None` past the end. O(1) after construction.
    pub fn get(&self, i: u64) -> Option<i64> {
        (i < self.len()).then(|| (self.init as i128 + self.shape.offset_of(i)) as i64)
    }

    /// The last element.
    pub fn last(&self) -> i64 {
        (self.init as i128 + self.shape.last_offset()) as i64
    }

    /// Position of the largest element ≤ `x`, for non-decreasing units. `None` when
    /// `x` is below the first element. O(k).
    pub fn position_at_or_below(&self, x: i64) -> Option<u64> {
        self.shape
            .position_at_or_below(x as i128 - self.init as i128)
    }

    /// The `count` values that would follow if the pattern went on repeating,
    /// continuing the delta vector where the unit stops. Values that would leave the
    /// `i64` range end the prediction early.
    pub fn predict_next(&self, count: usize) -> Vec<i64> {
        let k = self.deltas().len();
        if k == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(count.min(4096));
        let mut value = self.last() as i128;
        for j in 0..count {
            value += self.deltas()[j % k] as i128;
            if value < i64::MIN as i128 || value > i64::MAX as i128 {
                break;
            }
            out.push(value as i64);
        }
        out
    }

    /// Iterates the elements in order (expansion; for tests, export and baselines).
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(move |i| (self.init as i128 + self.shape.offset_of(i)) as i64)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(")?;
        for (j, d) in self.deltas.iter().enumerate() {
            if j > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, ")^{}", self.reps)
    }
}

impl std::fmt::Display for PatternUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shape.deltas.is_empty() {
            write!(f, "[{}]", self.init)
        } else {
            write!(f, "[{}, {}]", self.init, self.shape)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_example() {
        let u = PatternUnit::new(5, vec![2, 3], 2).unwrap();
        assert_eq!(u.iter().collect::<Vec<_>>(), vec![5, 7, 10, 12, 15]);
        assert_eq!(u.len(), 5);
        assert_eq!(u.last(), 15);
        assert_eq!(u.get(3), Some(12));
        assert_eq!(u.get(5), None);
        assert_eq!(u.position_at_or_below(4), None);
        assert_eq!(u.position_at_or_below(5), Some(0));
        assert_eq!(u.position_at_or_below(11), Some(2));
        assert_eq!(u.position_at_or_below(100), Some(4));
        assert_eq!(u.to_string(), "[5, (2, 3)^2]");
    }

    #[test]
    fn prediction_continues_the_delta_vector() {
        // The paper's section 4.2 example: [0, (3, 4, 7)^2] predicts 31, 35, 42.
        let u = PatternUnit::new(0, vec![3, 4, 7], 2).unwrap();
        assert_eq!(u.predict_next(3), vec![31, 35, 42]);
    }

    #[test]
    fn extremes_of_the_range() {
        assert!(PatternUnit::new(i64::MAX - 1, vec![1], 2).is_err());
        let u = PatternUnit::new(i64::MAX - 2, vec![1], 2).unwrap();
        assert_eq!(u.last(), i64::MAX);
        assert!(u.predict_next(1).is_empty());
        let d = PatternUnit::new(i64::MIN + 4, vec![-2], 2).unwrap();
        assert_eq!(d.last(), i64::MIN);
    }

    #[test]
    fn zero_stride_lookup_returns_last_position() {
        let u = PatternUnit::new(7, vec![0], 4).unwrap();
        assert_eq!(u.position_at_or_below(7), Some(4));
        assert_eq!(u.position_at_or_below(6), None);
    }
}
