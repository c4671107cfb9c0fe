//! Property tests of `PatternUnit` `[init, (d0…dk-1)^r]` against a naive reference
//! model: the unit's elements built by repeated addition in `i128` (for small `r`),
//! or — for huge `r`, where expansion is impossible — element `i` computed as
//! `init + Σ d[j mod k] for j < i` by a row/column formula in saturating `i128` and
//! searched by bisection. Checked: `new` is `Ok` exactly when every element fits in
//! `i64`; `len() == 1 + k·r` (the crate's element-count convention, computed in
//! `u128`); `iter`, `get` (every index and past the end), `last`, min/max offsets;
//! `position_at_or_below` for non-decreasing units equals "largest index `j` with
//! `e[j] <= x`" for `x` at every element, element ± 1, below the first and above the
//! last; `predict_next` equals the continuation of the naive expansion.

mod common;

use common::*;
use patio_core::PatternUnit;
use proptest::prelude::*;

/// Naive expansion by repeated addition; `None` when some element leaves `i64`.
fn naive(init: i64, deltas: &[i64], reps: u64) -> (Vec<i128>, bool) {
    let mut out = vec![init as i128];
    let mut v = init as i128;
    for _ in 0..reps {
        for &d in deltas {
            v += d as i128;
            out.push(v);
        }
    }
    let fits = out
        .iter()
        .all(|&e| e >= i64::MIN as i128 && e <= i64::MAX as i128);
    (out, fits)
}

/// Formula model for huge repetition counts: element `i` (as `u128`) in saturating i128.
struct Formula {
    init: i128,
    deltas: Vec<i64>,
    reps: u64,
}

impl Formula {
    fn k(&self) -> u128 {
        self.deltas.len() as u128
    }
    fn len(&self) -> u128 {
        1 + self.k() * self.reps as u128
    }
    fn prefix(&self, j: usize) -> i128 {
        self.deltas[..j].iter().map(|&d| d as i128).sum()
    }
    fn elem(&self, i: u128) -> i128 {
        if self.k() == 0 {
            return self.init;
        }
        let row = i / self.k();
        let col = (i % self.k()) as usize;
        let stride = self.prefix(self.deltas.len());
        let row_off = i128::try_from(row)
            .ok()
            .and_then(|r| r.checked_mul(stride))
            .unwrap_or(if stride > 0 { i128::MAX } else { i128::MIN });
        self.init
            .saturating_add(row_off)
            .saturating_add(self.prefix(col))
    }
    /// All elements fit: for each column the row offset is linear in the row, so its
    /// extremes are at the first and the last row holding that column.
    fn fits(&self) -> bool {
        let ok = |v: i128| v >= i64::MIN as i128 && v <= i64::MAX as i128;
        if self.k() == 0 || self.reps == 0 {
            return ok(self.init);
        }
        let last_row = self.reps as u128 - 1;
        (0..self.k()).all(|c| ok(self.elem(c)) && ok(self.elem(last_row * self.k() + c)))
            && ok(self.elem(self.len() - 1))
    }
}

fn reps_small() -> impl Strategy<Value = u64> {
    0u64..40
}

fn reps_any() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => 0u64..40,
        1 => (1u64 << 32)..=u64::MAX,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX / 2),
        1 => Just(u64::MAX / 3),
        1 => Just(1u64 << 63),
    ]
    .boxed()
}

/// Units whose elements approach one end of the range, so that some are just in and
/// some just out.
fn near_edge() -> BoxedStrategy<(i64, Vec<i64>, u64)> {
    prop_oneof![
        (0i64..200, prop::collection::vec(-3i64..6, 1..4), 0u64..60).prop_map(|(m, d, r)| (
            i64::MAX - m,
            d,
            r
        )),
        (0i64..200, prop::collection::vec(-6i64..3, 1..4), 0u64..60).prop_map(|(m, d, r)| (
            i64::MIN + m,
            d,
            r
        )),
        (
            special_i64(),
            prop::collection::vec(special_i64(), 1..3),
            0u64..3
        ),
    ]
    .boxed()
}

/// Delta vectors for huge repetition counts: arbitrary, or closing (summing to zero)
/// so that the values stay bounded however often the vector repeats.
fn huge_rep_deltas() -> BoxedStrategy<Vec<i64>> {
    prop_oneof![
        prop::collection::vec(delta(), 0..4),
        prop::collection::vec(-1000i64..1000, 0..3).prop_map(|mut d| {
            let sum: i64 = d.iter().sum();
            d.push(-sum);
            d
        }),
    ]
    .boxed()
}

fn unit_params() -> BoxedStrategy<(i64, Vec<i64>, u64)> {
    prop_oneof![
        3 => (special_i64(), prop::collection::vec(delta(), 0..6), reps_small()),
        2 => near_edge(),
    ]
    .boxed()
}

fn check_small(init: i64, deltas: Vec<i64>, reps: u64) -> Result<(), TestCaseError> {
    let (expected, fits) = naive(init, &deltas, reps);
    let got = PatternUnit::new(init, deltas.clone(), reps);
    prop_assert_eq!(
        got.is_ok(),
        fits,
        "new({}, {:?}, {}) -> {:?}",
        init,
        deltas,
        reps,
        got
    );
    let Ok(u) = got else { return Ok(()) };
    let expected: Vec<i64> = expected.into_iter().map(|e| e as i64).collect();
    let n = expected.len() as u64;
    prop_assert_eq!(u.len() as u128, 1 + deltas.len() as u128 * reps as u128);
    prop_assert_eq!(u.len(), n);
    prop_assert_eq!(u.iter().collect::<Vec<_>>(), expected.clone());
    for (i, &e) in expected.iter().enumerate() {
        prop_assert_eq!(u.get(i as u64), Some(e), "get({})", i);
    }
    for past in [n, n + 1, n + 1000, u64::MAX] {
        prop_assert_eq!(u.get(past), None, "get({}) past the end", past);
    }
    prop_assert_eq!(u.last(), *expected.last().unwrap());
    let lo = *expected.iter().min().unwrap() as i128 - init as i128;
    let hi = *expected.iter().max().unwrap() as i128 - init as i128;
    prop_assert_eq!(u.shape().min_offset(), lo);
    prop_assert_eq!(u.shape().max_offset(), hi);
    // Normalisation: an empty vector or zero repetitions is a single element.
    if deltas.is_empty() || reps == 0 {
        prop_assert!(u.deltas().is_empty() && u.reps() == 0);
    } else {
        prop_assert_eq!(u.deltas(), &deltas[..]);
        prop_assert_eq!(u.reps(), reps);
    }
    let sorted = expected.windows(2).all(|w| w[0] <= w[1]);
    prop_assert_eq!(
        u.shape().is_non_decreasing(),
        sorted || u.deltas().is_empty()
    );
    if sorted {
        for x in probe_points(&expected) {
            prop_assert_eq!(
                u.position_at_or_below(x),
                ref_position(&expected, x),
                "position_at_or_below({})",
                x
            );
        }
    }
    // Prediction continues the (normalised) delta vector: the naive expansion of the
    // same unit with more repetitions, cut at the first value leaving i64.
    let k = u.deltas().len();
    for count in [0usize, 1, 2, k, 2 * k + 3] {
        let want: Vec<i64> = match count.checked_div(k) {
            None => Vec::new(),
            Some(rows) => {
                let (longer, _) = naive(init, u.deltas(), u.reps() + rows as u64 + 1);
                longer[n as usize..]
                    .iter()
                    .take(count)
                    .take_while(|&&v| v >= i64::MIN as i128 && v <= i64::MAX as i128)
                    .map(|&v| v as i64)
                    .collect()
            }
        };
        prop_assert_eq!(u.predict_next(count), want, "predict_next({})", count);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    /// Small repetition counts: everything against the naive expansion.
    #[test]
    fn unit_matches_naive_expansion((init, deltas, reps) in unit_params()) {
        check_small(init, deltas, reps)?;
    }

    /// Non-decreasing units (the ones lookups run on), with duplicates from zero deltas.
    #[test]
    fn non_decreasing_unit_search(init in special_i64(), deltas in prop::collection::vec(prop_oneof![0i64..3, 0i64..1000, Just(0)], 1..6), reps in reps_small()) {
        check_small(init, deltas, reps)?;
    }

    /// Huge repetition counts: validity, length, random access and search by formula.
    #[test]
    fn unit_with_huge_reps(init in special_i64(), deltas in huge_rep_deltas(), reps in reps_any(), probes in prop::collection::vec(any::<u64>(), 8)) {
        let f = Formula { init: init as i128, deltas: deltas.clone(), reps };
        let fits = f.fits();
        let got = PatternUnit::new(init, deltas.clone(), reps);
        // The element count 1 + k·r must be representable as the u64 that len() returns.
        let len_fits = f.len() <= u64::MAX as u128;
        prop_assert_eq!(got.is_ok(), fits && len_fits,
            "new({}, {:?}, {}): values fit: {}, 1+k·r = {} fits u64: {}; got {:?}", init, deltas, reps, fits, f.len(), len_fits, got);
        let Ok(u) = got else { return Ok(()) };
        prop_assert_eq!(u.len() as u128, f.len());
        let n = f.len();
        let mut idx: Vec<u128> = vec![0, n - 1, n / 2];
        idx.extend(probes.iter().map(|&p| p as u128 % n));
        for &i in &idx {
            prop_assert_eq!(u.get(i as u64).map(i128::from), Some(f.elem(i)), "get({})", i);
        }
        prop_assert_eq!(u.last() as i128, f.elem(n - 1));
        if n < u64::MAX as u128 {
            prop_assert_eq!(u.get(n as u64), None);
        }
        if deltas.iter().all(|&d| d >= 0) {
            // Reference search: bisection over the (monotone) formula.
            let reference = |x: i64| -> Option<u64> {
                if f.elem(0) > x as i128 { return None; }
                let (mut lo, mut hi) = (0u128, n - 1);
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if f.elem(mid) <= x as i128 { lo = mid } else { hi = mid - 1 }
                }
                Some(lo as u64)
            };
            for &i in &idx {
                let v = f.elem(i) as i64;
                for x in [v, v.saturating_sub(1), v.saturating_add(1)] {
                    prop_assert_eq!(u.position_at_or_below(x), reference(x), "position_at_or_below({})", x);
                }
            }
        }
    }
}
