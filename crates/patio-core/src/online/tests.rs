//! Tests of the online analyzer against plain reference behaviour.

use super::bodies::Pat;
use super::model::{MODEL_MAGIC, MODEL_VERSION};
use super::phases::phase_ends;
use super::*;
use crate::codec::{put_uvarint, write_blob, Cursor};
use crate::tree::Body;

fn run(p: &mut Predictor, offsets: &[u64], len: u64) -> Vec<bool> {
    offsets.iter().map(|&o| p.observe(o, len)).collect()
}

#[test]
fn strided_is_confirmed_then_predicted() {
    let mut p = Predictor::new(OnlineConfig::default());
    let offsets: Vec<u64> = (0..20).map(|i| 1000 + i * 300).collect();
    let hits = run(&mut p, &offsets, 100);
    let first_hit = hits.iter().position(|&h| h).unwrap();
    assert!(first_hit <= 4, "{hits:?}");
    assert!(hits[first_hit..].iter().all(|&h| h));
    assert_eq!(p.following(), Following::Strided);
    assert_eq!(
        p.predict(2).iter().map(|x| x.offset).collect::<Vec<_>>(),
        [7000, 7300]
    );
}

#[test]
fn repeating_deltas_and_kd_strided() {
    let mut p = Predictor::new(OnlineConfig::default());
    let deltas: Vec<u64> = (0..20)
        .flat_map(|r| [0, 3, 7].map(|c| r * 14 + c))
        .collect();
    let hits = run(&mut p, &deltas, 1);
    assert!(hits[9..].iter().all(|&h| h), "{hits:?}");
    let mut q = Predictor::new(OnlineConfig::default());
    let grid: Vec<u64> = (0..10)
        .flat_map(|r| (0..6).map(move |c| r * 10_000 + c * 64))
        .collect();
    let hits = run(&mut q, &grid, 8);
    assert!(hits[20..].iter().all(|&h| h), "{hits:?}");
    assert_eq!(q.following(), Following::KdStrided);
}

#[test]
fn one_random_request_does_not_break_a_pattern() {
    let mut p = Predictor::new(OnlineConfig::default());
    run(
        &mut p,
        &(0..10).map(|i| i * 4096 * 3).collect::<Vec<_>>(),
        4096,
    );
    assert!(!p.observe(999_999_999, 4096));
    assert!(p.observe(10 * 4096 * 3, 4096));
    assert_eq!(p.following(), Following::Strided);
}

#[test]
fn a_random_request_does_not_switch_to_a_remembered_pattern() {
    let mut p = Predictor::new(OnlineConfig::default());
    // Remember a stride-100 pattern, then lock onto a stride-4096 one.
    run(
        &mut p,
        &(0..10).map(|i| 1_000_000 + i * 100).collect::<Vec<_>>(),
        8,
    );
    run(&mut p, &(0..10).map(|i| i * 4096).collect::<Vec<_>>(), 8);
    assert!(!p.observe(777_777, 8));
    assert!(
        p.observe(10 * 4096, 8),
        "the stride-4096 pattern survives one random request"
    );
    // Nor does one of another length: the old pattern is followed again.
    assert!(!p.observe(555_555, 16));
    assert!(p.observe(11 * 4096, 8));
    assert_eq!(p.predict(1)[0].offset, 12 * 4096);
}

#[test]
fn skips_do_not_lock_onto_half_the_stride() {
    let mut p = Predictor::new(OnlineConfig::default());
    run(&mut p, &(0..10).map(|i| i * 32).collect::<Vec<_>>(), 8);
    p.observe(5_000_000, 8);
    p.observe(9_000_000, 8);
    p.observe(13_000_000, 8);
    // A stride of 64 from a fresh start: every request would "match" stride 32 by
    // skipping one; the analyzer must find the real stride instead.
    let hits = run(
        &mut p,
        &(0..20).map(|i| 100_000 + i * 64).collect::<Vec<_>>(),
        8,
    );
    assert!(hits[8..].iter().all(|&h| h), "{hits:?}");
    assert_eq!(p.predict(1)[0].offset, 100_000 + 20 * 64);
}

#[test]
fn contiguous_with_varying_sizes() {
    let mut p = Predictor::new(OnlineConfig::default());
    let mut at = 0;
    let mut hits = Vec::new();
    for i in 0..10u64 {
        let len = 100 + (i * 37) % 50;
        hits.push(p.observe(at, len));
        at += len;
    }
    assert!(hits[3..].iter().all(|&h| h), "{hits:?}");
    assert_eq!(p.following(), Following::Contiguous);
}

#[test]
fn saved_patterns_predict_the_next_run_early() {
    let grid: Vec<u64> = (0..8)
        .flat_map(|r| (0..5).map(move |c| r * 1000 + c * 10))
        .collect();
    let mut first = Predictor::new(OnlineConfig::default());
    run(&mut first, &grid, 10);
    let saved = first.save();
    let mut second = Predictor::load(OnlineConfig::default(), &saved).unwrap();
    let shifted: Vec<u64> = grid.iter().map(|o| o + 50_000).collect();
    let hits = run(&mut second, &shifted, 10);
    assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
    assert!(Predictor::load(OnlineConfig::default(), &saved[..saved.len() - 1]).is_err());
}

#[test]
fn version_1_models_load() {
    // PPRD version 1: `uvar count`, bodies without request lengths.
    let mut payload = Vec::new();
    put_uvarint(&mut payload, 1);
    Pat::flat(&[64], 3).encode(&mut payload);
    let blob = write_blob(MODEL_MAGIC, 1, &payload);
    let mut p = Predictor::load(OnlineConfig::default(), &blob).unwrap();
    let hits = run(
        &mut p,
        &(0..6).map(|i| 5000 + i * 64).collect::<Vec<_>>(),
        8,
    );
    assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
    // Version 2 has request lengths and no phase ends.
    let mut v2 = Vec::new();
    put_uvarint(&mut v2, 1);
    put_uvarint(&mut v2, 8);
    Pat::flat(&[64], 3).encode(&mut v2);
    let mut p = Predictor::load(OnlineConfig::default(), &write_blob(MODEL_MAGIC, 2, &v2)).unwrap();
    let hits = run(
        &mut p,
        &(0..6).map(|i| 9000 + i * 64).collect::<Vec<_>>(),
        8,
    );
    assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
    let bad = write_blob(MODEL_MAGIC, MODEL_VERSION + 1, &payload);
    assert!(Predictor::load(OnlineConfig::default(), &bad).is_err());
}

/// Variables of interleaved records, each with its own record length and an
/// irregular record count: `(offsets, length)` per variable.
fn variables(counts: &[u64]) -> Vec<(Vec<u64>, u64)> {
    let (procs, rank) = (16u64, 3u64);
    let mut base = 1 << 20;
    counts
        .iter()
        .enumerate()
        .map(|(v, &count)| {
            let size = 4096 * (1 + v as u64 % 5);
            let offsets = (0..count)
                .map(|j| base + (j * procs + rank) * size)
                .collect();
            base += count * procs * size;
            (offsets, size)
        })
        .collect()
}

/// Predictions made right after the last request of each variable that fall
/// outside the stream's remaining requests.
fn past_variable_ends(p: &mut Predictor, vars: &[(Vec<u64>, u64)]) -> Vec<usize> {
    let all: Vec<u64> = vars.iter().flat_map(|v| v.0.clone()).collect();
    let mut seen = 0;
    let mut wasted = Vec::new();
    for (offsets, len) in vars {
        for &o in offsets {
            p.observe(o, *len);
            seen += 1;
        }
        let rest = &all[seen..];
        wasted.push(
            p.predict(8)
                .iter()
                .filter(|x| !rest.contains(&x.offset))
                .count(),
        );
    }
    wasted
}

#[test]
fn recorded_phase_ends_stop_a_repeated_run_at_each_end() {
    let vars = variables(&[23, 41, 17, 30, 44, 19, 36]);
    let mut first = Predictor::new(OnlineConfig::default());
    let wasted = past_variable_ends(&mut first, &vars);
    assert!(wasted.iter().sum::<usize>() > 0, "{wasted:?}");
    let saved = first.save();
    let mut second = Predictor::load(OnlineConfig::default(), &saved).unwrap();
    let wasted = past_variable_ends(&mut second, &vars);
    assert!(wasted.iter().all(|&w| w == 0), "{wasted:?}");
    // Saved again, the ends are kept, once each.
    let again = second.save();
    assert_eq!(again.len(), saved.len());
    let mut third = Predictor::load(OnlineConfig::default(), &again).unwrap();
    assert!(past_variable_ends(&mut third, &vars)
        .iter()
        .all(|&w| w == 0));
}

/// The first record of the next variable can land exactly one element past the
/// end of the last one's stride (here element 9 of variable 0): it matches by
/// skipping one, yet variable 0 had 8 records, not 9.
#[test]
fn a_phase_ended_by_a_skipping_match_counts_what_was_read() {
    let (procs, rank) = (15u64, 5u64);
    let mut p = Predictor::new(OnlineConfig::default());
    let mut base = 0;
    for size in [3 * 4096, 12 * 4096] {
        run(
            &mut p,
            &(0..8)
                .map(|j| base + (j * procs + rank) * size)
                .collect::<Vec<_>>(),
            size,
        );
        base += 8 * procs * size;
    }
    let ends = phase_ends(Cursor::new(&p.ends)).unwrap();
    assert_eq!(ends, [(5 * 3 * 4096, 8)]);
}

#[test]
fn phase_ends_are_bounded() {
    let counts: Vec<u64> = (0..200).map(|i| 16 + i * 7 % 32).collect();
    let mut p = Predictor::new(OnlineConfig::default());
    past_variable_ends(&mut p, &variables(&counts));
    assert!(!p.ends.is_empty() && p.ends.len() <= PHASE_ENDS_BYTES);
    assert!(p.model_bytes() < 1024, "{}", p.model_bytes());
    let mut bad = Vec::new();
    put_uvarint(&mut bad, 0);
    put_uvarint(&mut bad, 3);
    bad.extend_from_slice(&[0x02, 0x80, 0x80]);
    let err = Predictor::load(OnlineConfig::default(), &write_blob(MODEL_MAGIC, 3, &bad));
    assert!(err.is_err());
}

#[test]
fn correlation_predicts_frequent_successors() {
    let mut p = Predictor::new(OnlineConfig::default());
    for round in 0..4u64 {
        for o in [10u64, 20, 30, 5_000 + round * 7919 % 1000] {
            p.observe(o * 4096, 4096);
        }
    }
    p.observe(10 * 4096, 4096);
    let next = p.predict(2);
    assert_eq!(
        next.iter().map(|x| x.offset).collect::<Vec<_>>(),
        [20 * 4096, 30 * 4096],
        "{:?}",
        p.following()
    );
}

#[test]
fn compact_bodies_flatten_nesting_and_extrapolate() {
    use crate::unit::Shape;
    let row = Body::Flat(Shape::new(vec![8], 3));
    let grid = Body::nested(Body::Flat(Shape::new(vec![100], 4)), row.clone());
    let cube = Body::nested(Body::Flat(Shape::new(vec![10_000], 1)), grid.clone());
    for body in [row, grid, cube] {
        let pat = Pat::from_body(&body).unwrap();
        for i in 0..body.len() {
            assert_eq!(pat.offset_of(i), Some(body.offset_of(i)), "{body} at {i}");
        }
        // Past the end, the outermost level continues.
        assert_eq!(
            pat.offset_of(body.len()),
            Some(body.offset_of(body.len())),
            "{body}"
        );
        let mut bytes = Vec::new();
        pat.encode(&mut bytes);
        assert_eq!(Pat::decode(&mut Cursor::new(&bytes)).unwrap(), pat);
    }
    let grid = Pat::from_body(&Body::nested(
        Body::Flat(Shape::new(vec![100], 4)),
        Body::Flat(Shape::new(vec![8], 3)),
    ))
    .unwrap();
    assert_eq!(grid.truncate(8).unwrap().len(), 8);
    assert_eq!(grid.truncate(4).unwrap(), Pat::flat(&[8], 3));
    assert!(grid.truncate(6).is_none());
    assert_eq!(grid.truncate(3), Some(Pat::flat(&[8], 2)));
    assert_eq!(
        Pat::flat(&[3, 4], 9).truncate(5),
        Some(Pat::flat(&[3, 4], 2))
    );
    assert!(Pat::flat(&[3, 4, 5], 9).truncate(5).is_none());
    // A 2-D array in its flat form (row, then gap) truncates to whole rows, in the
    // same form as the nested one.
    let flat_grid = Pat::flat(&[8, 8, 8, 76], 4);
    assert_eq!(flat_grid.truncate(8), grid.truncate(8));
    assert_eq!(Pat::flat(&[5, 5, 5], 2), Pat::flat(&[5], 6));
    assert_eq!(Pat::flat(&[48], 9).scaled(3, 4), Some(Pat::flat(&[36], 9)));
    assert!(Pat::flat(&[10], 9).scaled(3, 4).is_none());
}

#[test]
fn history_keeps_large_deltas_exactly() {
    let mut ring = DeltaRing::new(9);
    let offsets = [5u64, 1 << 40, 3, u64::MAX, 0, 7, 1 << 62, 9];
    for w in offsets.windows(2) {
        ring.push(w[1].wrapping_sub(w[0]) as i64);
    }
    let kept = ring.offsets(9);
    let expect: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
    assert!(expect.ends_with(&kept) && kept.len() >= 3, "{kept:?}");
}

#[test]
fn a_new_request_length_scales_the_remembered_stride() {
    // Records of 16 processes interleaved: the stride is 16 record lengths, and
    // the next variable has records of another length.
    let mut p = Predictor::new(OnlineConfig::default());
    let first: Vec<u64> = (0..20).map(|j| (j * 16 + 5) * 4096).collect();
    run(&mut p, &first, 4096);
    let base = 20 * 16 * 4096;
    let second: Vec<u64> = (0..20).map(|j| base + (j * 16 + 5) * 8192).collect();
    let hits = run(&mut p, &second, 8192);
    assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
}

#[test]
fn phases_compose_with_their_starts() {
    // Time steps 5, 6, 14, 15, 29, 30, …, each read as 16 strided requests.
    let steps: Vec<u64> = [5u64, 6, 14, 15]
        .iter()
        .cycle()
        .zip(0..)
        .map(|(&t, i)| t + 24 * (i / 4))
        .take(24)
        .collect();
    let offsets: Vec<u64> = steps
        .iter()
        .flat_map(|&t| (0..16).map(move |l| t * (1 << 22) + l * (1 << 18) + 3 * (1 << 15)))
        .collect();
    let mut p = Predictor::new(OnlineConfig::default());
    let hits = run(&mut p, &offsets, 1 << 15);
    let locked = hits.iter().rposition(|&h| !h).map_or(0, |i| i + 1);
    assert!(locked <= 6 * 32, "locked from {locked}: {hits:?}");
    assert_eq!(p.following(), Following::Composed);
    let next = steps.last().unwrap() + 14;
    let at = p.predict(64);
    assert_eq!(at.len(), 64);
    assert_eq!(at[0].offset, next * (1 << 22) + 3 * (1 << 15));
}
