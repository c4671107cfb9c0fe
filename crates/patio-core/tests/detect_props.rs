//! Property tests of the detector (`Detector::detect`) and the pattern tree
//! (`PatternSeq`) against the plainest reference there is: the input sequence itself.
//!
//! * `expand_pieces(detect(xs)) == xs` and `PatternSeq::build(xs).expand() == xs` for
//!   structured and arbitrary sequences (including `i64::MIN`/`MAX` neighbours and
//!   deltas that overflow), for every window 1..=40; detection is deterministic.
//! * `get(i) == xs[i]` for every `i`, `None` past the end; `coverage` in `[0, 1]`.
//! * For sorted `xs`, `position_at_or_below(x)` equals the reference "largest index
//!   `j` with `xs[j] <= x`" (binary search on the plain vector) — on strictly
//!   increasing inputs, and separately on inputs with duplicates (the convention
//!   `unit.rs` documents and tests: among equal elements the last one wins).
//! * A 2-D strided sequence `a + i·R + j·S` (`R > (cols-1)·S`) and a 3-D strided
//!   sequence come out of `PatternSeq::build` as exactly one pattern node, within the
//!   scope the detector promises (docs/ARCHITECTURE.md, "Semantics decided here"):
//!   - rows of at least 4 columns are found at any window (2 or more rows; in 3-D,
//!     2 or more planes of at least 4 such rows);
//!   - rows of 2–3 columns are found when the window holds a row (3 or more rows);
//!   - a 3-D array whose plane gap coincides with a stride is found when the window
//!     holds a whole plane (3 or more planes). Below these sizes a nested entry would
//!     not be smaller than the values, and with a smaller window the parse is
//!     genuinely ambiguous (the last row of a plane continues into the next plane).

mod common;

use common::*;
use patio_core::tree::expand_pieces;
use patio_core::{Detector, PatternSeq, Piece};
use proptest::prelude::*;

fn describe(seq: &PatternSeq) -> Vec<String> {
    seq.pieces().iter().map(|p| p.to_string()).collect()
}

fn check_positions(xs: &[i64], w: usize) -> Result<(), TestCaseError> {
    let seq = PatternSeq::build(xs, &Detector::new(w));
    prop_assert_eq!(seq.expand(), xs.to_vec());
    for x in probe_points(xs) {
        prop_assert_eq!(
            seq.position_at_or_below(x),
            ref_position(xs, x),
            "position_at_or_below({}) with window {}; pieces {:?}",
            x,
            w,
            describe(&seq)
        );
    }
    Ok(())
}

/// `(base, offsets)` placed so that every value fits: anywhere, or flush against
/// either end of the `i64` range.
fn place(offsets: Vec<i128>, choice: u8, anywhere: i64) -> Vec<i64> {
    let lo = offsets.iter().copied().min().unwrap_or(0);
    let hi = offsets.iter().copied().max().unwrap_or(0);
    let base: i128 = match choice % 3 {
        0 => (anywhere as i128).clamp(i64::MIN as i128 - lo, i64::MAX as i128 - hi),
        1 => i64::MIN as i128 - lo,
        _ => i64::MAX as i128 - hi,
    };
    offsets.into_iter().map(|o| (base + o) as i64).collect()
}

fn col_stride() -> BoxedStrategy<i64> {
    prop_oneof![
        0i64..20,
        -20i64..20,
        -1_000_000i64..1_000_000,
        Just(0),
        (1i64 << 30)..(1i64 << 40)
    ]
    .boxed()
}

fn gap() -> BoxedStrategy<i64> {
    prop_oneof![1i64..20, 1i64..1_000_000, (1i64 << 30)..(1i64 << 40)].boxed()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn detect_expands_back_to_input(xs in sequence(), w in window()) {
        let d = Detector::new(w);
        let pieces = d.detect(&xs);
        prop_assert_eq!(expand_pieces(&pieces), xs.clone());
        prop_assert_eq!(d.detect(&xs), pieces, "detection is not deterministic");
    }

    #[test]
    fn tree_expands_and_answers_get(xs in sequence(), w in window()) {
        let seq = PatternSeq::build(&xs, &Detector::new(w));
        prop_assert_eq!(seq.expand(), xs.clone());
        prop_assert_eq!(seq.len(), xs.len() as u64);
        prop_assert_eq!(seq.is_empty(), xs.is_empty());
        for (i, &x) in xs.iter().enumerate() {
            prop_assert_eq!(seq.get(i as u64), Some(x), "get({}); pieces {:?}", i, describe(&seq));
        }
        let n = xs.len() as u64;
        for past in [n, n + 1, u64::MAX] {
            prop_assert_eq!(seq.get(past), None);
        }
        let c = seq.coverage();
        prop_assert!((0.0..=1.0).contains(&c), "coverage {}", c);
        let covered: u64 = seq.pieces().iter().filter(|p| matches!(p, Piece::Node(_))).map(Piece::len).sum();
        if n > 0 {
            prop_assert_eq!(c, covered as f64 / n as f64);
        }
    }

    #[test]
    fn search_strictly_increasing(xs in sorted_sequence(), w in window()) {
        let mut xs = xs;
        xs.dedup();
        check_positions(&xs, w)?;
    }

    /// Duplicates: the last of equal elements wins (unit.rs convention), across pieces too.
    #[test]
    fn search_with_duplicates(xs in sorted_sequence(), w in window()) {
        check_positions(&xs, w)?;
    }

    #[test]
    fn two_d_strided_is_one_node(
        rows in 2usize..12, cols in 4usize..16, s in col_stride(), g in gap(),
        choice in any::<u8>(), anywhere in special_i64(), w in window(),
    ) {
        check_two_d(rows, cols, s, g, choice, anywhere, w)?;
    }

    /// Narrow rows (2–3 columns) need a window that holds a row.
    #[test]
    fn two_d_narrow_rows_are_one_node_when_the_window_holds_a_row(
        rows in 3usize..12, cols in 2usize..4, s in col_stride(), g in gap(),
        choice in any::<u8>(), anywhere in special_i64(), extra in 0usize..30,
    ) {
        check_two_d(rows, cols, s, g, choice, anywhere, cols + extra)?;
    }

    #[test]
    fn three_d_strided_is_one_node(
        planes in 2usize..7, rows in 4usize..7, cols in 4usize..7, s in col_stride(), g1 in gap(), g2 in gap(),
        choice in any::<u8>(), anywhere in special_i64(), w in window(),
    ) {
        // A plane gap equal to the column stride is the ambiguous case covered below.
        prop_assume!(g2 != s);
        check_three_d(planes, rows, cols, s, g1, g2, choice, anywhere, w, 0)?;
    }

    /// Plane or row gaps that coincide with a stride: found when the window holds a
    /// plane.
    #[test]
    fn three_d_with_coincident_gaps_is_one_node_when_the_window_holds_a_plane(
        planes in 3usize..6, rows in 3usize..6, cols in 2usize..6, s in col_stride(), g1 in gap(), g2 in gap(),
        choice in any::<u8>(), anywhere in special_i64(), extra in 0usize..8, coincide in 0u8..4,
    ) {
        check_three_d(planes, rows, cols, s, g1, g2, choice, anywhere, rows * cols + extra, coincide)?;
    }
}

fn check_two_d(
    rows: usize,
    cols: usize,
    s: i64,
    g: i64,
    choice: u8,
    anywhere: i64,
    w: usize,
) -> Result<(), TestCaseError> {
    let r = (cols as i128 - 1) * s as i128 + g as i128;
    let offsets: Vec<i128> = (0..rows as i128)
        .flat_map(|i| (0..cols as i128).map(move |j| i * r + j * s as i128))
        .collect();
    let xs = place(offsets, choice, anywhere);
    let seq = PatternSeq::build(&xs, &Detector::new(w));
    prop_assert_eq!(seq.expand(), xs.clone());
    prop_assert!(
        seq.pieces().len() == 1 && matches!(seq.pieces()[0], Piece::Node(_)),
        "{}x{} (R = {}, S = {}) window {}: {:?}",
        rows,
        cols,
        r,
        s,
        w,
        describe(&seq)
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn check_three_d(
    planes: usize,
    rows: usize,
    cols: usize,
    s: i64,
    g1: i64,
    g2: i64,
    choice: u8,
    anywhere: i64,
    w: usize,
    coincide: u8,
) -> Result<(), TestCaseError> {
    // Coincidences a greedy parse can trip over: the gap between planes (or rows)
    // equal to the column stride, or the plane gap equal to the row gap.
    let (g1, g2) = match coincide {
        1 if s >= 1 => (g1, s),
        2 => (g1, g1),
        3 if s >= 1 => (s, g2),
        _ => (g1, g2),
    };
    let s = s as i128;
    let r = (cols as i128 - 1) * s + g1 as i128;
    let p = (rows as i128 - 1) * r + (cols as i128 - 1) * s + g2 as i128;
    let offsets: Vec<i128> = (0..planes as i128)
        .flat_map(|a| {
            (0..rows as i128)
                .flat_map(move |b| (0..cols as i128).map(move |c| a * p + b * r + c * s))
        })
        .collect();
    let xs = place(offsets, choice, anywhere);
    let seq = PatternSeq::build(&xs, &Detector::new(w));
    prop_assert_eq!(seq.expand(), xs.clone());
    prop_assert!(
        seq.pieces().len() == 1 && matches!(seq.pieces()[0], Piece::Node(_)),
        "{}x{}x{} (P = {}, R = {}, S = {}) window {}: {:?}",
        planes,
        rows,
        cols,
        p,
        r,
        s,
        w,
        describe(&seq)
    );
    Ok(())
}
