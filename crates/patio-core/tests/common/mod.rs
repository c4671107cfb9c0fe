//! Shared generators and reference helpers for the patio-core property tests.
//!
//! The generators produce *structured* inputs — strided, 2-D and 3-D strided,
//! repeating delta vectors, constants, concatenations of those with random noise
//! inserted — as well as fully arbitrary `i64` values biased towards `i64::MIN`,
//! `i64::MAX` and their neighbours, because uniform random sequences almost never
//! exercise the pattern paths. Structured values are computed with wrapping
//! arithmetic on purpose: near the ends of the range that produces deltas that do not
//! fit in `i64`, which the detector must treat as piece boundaries.
//!
//! Every property file uses `config(cases)`, which disables proptest's failure
//! persistence (no `proptest-regressions/` files are written next to the sources);
//! `PROPTEST_CASES=N` overrides the per-property case counts for a deeper run.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// Proptest configuration with `cases` cases (or `PROPTEST_CASES` when set, for
/// deeper runs) and no regression files.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    }
}

/// Detector windows to try: the whole range the brief asks for.
pub fn window() -> impl Strategy<Value = usize> {
    1usize..=40
}

/// Values biased towards the interesting places of the `i64` range.
pub fn special_i64() -> BoxedStrategy<i64> {
    prop_oneof![
        4 => -1000i64..1000,
        2 => any::<i64>(),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => i64::MIN..i64::MIN + 16,
        1 => i64::MAX - 16..=i64::MAX,
        1 => -(1i64 << 40)..(1i64 << 40),
    ]
    .boxed()
}

/// Strides / deltas: mostly small, sometimes huge.
pub fn delta() -> BoxedStrategy<i64> {
    prop_oneof![
        4 => -20i64..20,
        2 => -5000i64..5000,
        1 => special_i64(),
    ]
    .boxed()
}

pub fn strided(init: i64, stride: i64, n: usize) -> Vec<i64> {
    (0..n as i64)
        .map(|i| init.wrapping_add(stride.wrapping_mul(i)))
        .collect()
}

pub fn grid2(init: i64, rows: usize, cols: usize, r: i64, s: i64) -> Vec<i64> {
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows as i64 {
        for j in 0..cols as i64 {
            out.push(
                init.wrapping_add(r.wrapping_mul(i))
                    .wrapping_add(s.wrapping_mul(j)),
            );
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub fn grid3(
    init: i64,
    planes: usize,
    rows: usize,
    cols: usize,
    p: i64,
    r: i64,
    s: i64,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(planes * rows * cols);
    for a in 0..planes as i64 {
        for b in 0..rows as i64 {
            for c in 0..cols as i64 {
                out.push(
                    init.wrapping_add(p.wrapping_mul(a))
                        .wrapping_add(r.wrapping_mul(b))
                        .wrapping_add(s.wrapping_mul(c)),
                );
            }
        }
    }
    out
}

pub fn repeating(init: i64, deltas: &[i64], reps: usize) -> Vec<i64> {
    let mut out = vec![init];
    let mut v = init;
    for _ in 0..reps {
        for &d in deltas {
            v = v.wrapping_add(d);
            out.push(v);
        }
    }
    out
}

/// One structured (or arbitrary) run of values.
pub fn segment() -> BoxedStrategy<Vec<i64>> {
    prop_oneof![
        3 => (special_i64(), delta(), 0usize..120).prop_map(|(a, s, n)| strided(a, s, n)),
        3 => (special_i64(), 1usize..10, 1usize..10, delta(), delta())
            .prop_map(|(a, rows, cols, r, s)| grid2(a, rows, cols, r, s)),
        2 => (special_i64(), 1usize..5, 1usize..6, 1usize..6, delta(), delta(), delta())
            .prop_map(|(a, pl, rows, cols, p, r, s)| grid3(a, pl, rows, cols, p, r, s)),
        3 => (special_i64(), prop::collection::vec(delta(), 1..8), 0usize..20)
            .prop_map(|(a, d, reps)| repeating(a, &d, reps)),
        1 => (special_i64(), 0usize..40).prop_map(|(v, n)| vec![v; n]),
        2 => prop::collection::vec(special_i64(), 0..60),
    ]
    .boxed()
}

/// Concatenated segments with a little noise: inserted or replaced values.
pub fn sequence() -> BoxedStrategy<Vec<i64>> {
    (
        prop::collection::vec(segment(), 1..4),
        prop::collection::vec((any::<Index>(), special_i64(), any::<bool>()), 0..4),
    )
        .prop_map(|(segs, noise)| {
            let mut xs: Vec<i64> = segs.into_iter().flatten().collect();
            for (at, v, insert) in noise {
                if insert || xs.is_empty() {
                    let i = at.index(xs.len() + 1);
                    xs.insert(i, v);
                } else {
                    let i = at.index(xs.len());
                    xs[i] = v;
                }
            }
            xs
        })
        .boxed()
}

/// Non-decreasing structured sequences that keep their nesting (grids whose row
/// stride is at least the row span, so rows may touch: duplicates at row joins),
/// plus sorted arbitrary sequences.
pub fn sorted_sequence() -> BoxedStrategy<Vec<i64>> {
    prop_oneof![
        2 => sequence().prop_map(|mut xs| {
            xs.sort_unstable();
            xs
        }),
        2 => (-(1i64 << 40)..(1i64 << 40), 1usize..12, 1usize..12, 0i64..50, 0i64..200)
            .prop_map(|(a, rows, cols, s, gap)| grid2(a, rows, cols, (cols as i64 - 1) * s + gap, s)),
        1 => (-(1i64 << 40)..(1i64 << 40), 1usize..6, 1usize..6, 1usize..6, 0i64..20, 0i64..50, 0i64..50)
            .prop_map(|(a, pl, rows, cols, s, g1, g2)| {
                let r = (cols as i64 - 1) * s + g1;
                let p = (rows as i64 - 1) * r + (cols as i64 - 1) * s + g2;
                grid3(a, pl, rows, cols, p, r, s)
            }),
        1 => (0i64..50, 0usize..200).prop_map(|(s, n)| strided(i64::MAX - s * n as i64, s, n)),
        1 => (0i64..50, 0usize..200).prop_map(|(s, n)| strided(i64::MIN, s, n)),
        1 => (special_i64(), prop::collection::vec(0i64..30, 1..6), 0usize..20).prop_map(|(a, d, reps)| {
            let span: i64 = d.iter().sum::<i64>() * reps as i64;
            repeating(a.min(i64::MAX - span), &d, reps)
        }),
    ]
    .boxed()
}

/// Largest index `j` with `xs[j] <= x` in a non-decreasing `xs`.
pub fn ref_position(xs: &[i64], x: i64) -> Option<u64> {
    xs.partition_point(|&v| v <= x)
        .checked_sub(1)
        .map(|j| j as u64)
}

/// Query points around every element of `xs`: the element, ±1, and the ends.
pub fn probe_points(xs: &[i64]) -> Vec<i64> {
    let mut out = vec![i64::MIN, i64::MAX, 0];
    for &v in xs {
        out.extend([v, v.saturating_sub(1), v.saturating_add(1)]);
    }
    if let (Some(&lo), Some(&hi)) = (xs.iter().min(), xs.iter().max()) {
        out.extend([lo.saturating_sub(1000), hi.saturating_add(1000)]);
    }
    out
}

/// `unique` followed by copies of its members picked by `copies` (stream sets with
/// repeated streams, as POSIX repeats MPI-IO).
pub fn with_copies<T: Clone>(unique: &[T], copies: &[Index]) -> Vec<T> {
    let mut all = unique.to_vec();
    if !unique.is_empty() {
        all.extend(copies.iter().map(|c| unique[c.index(unique.len())].clone()));
    }
    all
}

/// The stream set's default options (0) or its `n`-th ablation (1…).
pub fn set_options(n: usize) -> patio_core::blockset::Options {
    match n {
        0 => patio_core::blockset::Options::default(),
        a => patio_core::blockset::Options::ablations()[a - 1].1,
    }
}

/// Every prefix of a stream set and every byte of it flipped (three ways) is an error
/// naming a byte offset.
pub fn set_refuses_damage(bytes: &[u8]) {
    use patio_core::blockset::decode;
    for cut in 0..bytes.len() {
        let e = decode(&bytes[..cut]).expect_err("a prefix");
        assert!(e.to_string().contains("byte"), "{e}");
    }
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.to_vec();
            bad[at] ^= flip;
            let e = decode(&bad).expect_err("damage detected");
            assert!(e.to_string().contains("byte"), "{e}");
        }
    }
}
