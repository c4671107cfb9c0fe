//! Property tests of the online analyzer (`online::Predictor`) against the plain
//! request sequences that generated them: every structured kind is locked within a
//! bounded number of requests and then predicted exactly; one-off random requests do
//! not break a locked pattern; a real change is followed within a few requests; saved
//! patterns let a new run predict from its second request.

use patio_core::online::{Following, OnlineConfig, Predictor};
use proptest::prelude::*;

/// Index of the first request from which every later request was predicted.
fn locked_from(hits: &[bool]) -> usize {
    hits.iter().rposition(|&h| !h).map_or(0, |i| i + 1)
}

fn observe_all(p: &mut Predictor, offsets: &[u64], len: u64) -> Vec<bool> {
    offsets.iter().map(|&o| p.observe(o, len)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn strided_locks_within_five_requests(start in 0u64..1 << 40, stride in 1u64..1 << 24, len in 1u64..1 << 16, n in 12usize..60) {
        let offsets: Vec<u64> = (0..n as u64).map(|i| start + i * stride).collect();
        let mut p = Predictor::new(OnlineConfig::default());
        let hits = observe_all(&mut p, &offsets, len);
        prop_assert!(locked_from(&hits) <= 5, "{:?}", hits);
        prop_assert_eq!(p.predict(1)[0].offset, start + n as u64 * stride);
    }

    #[test]
    fn repeating_deltas_lock_within_two_periods(
        start in 0u64..1 << 40, deltas in proptest::collection::vec(1u64..100_000, 2..6), reps in 6usize..12,
    ) {
        prop_assume!(deltas.iter().any(|&d| d != deltas[0]));
        let mut offsets = vec![start];
        for i in 0..deltas.len() * reps {
            offsets.push(offsets[i] + deltas[i % deltas.len()]);
        }
        let mut p = Predictor::new(OnlineConfig::default());
        let hits = observe_all(&mut p, &offsets, 1);
        prop_assert!(locked_from(&hits) <= 2 * deltas.len() + 2, "{:?}", hits);
    }

    #[test]
    fn two_d_strided_locks_within_two_rows(
        start in 0u64..1 << 40, rows in 4u64..8, cols in 4u64..13, col_stride in 1u64..10_000, gap in 1u64..1_000_000,
    ) {
        let row_stride = (cols - 1) * col_stride + gap;
        prop_assume!(gap != col_stride);
        let offsets: Vec<u64> =
            (0..rows).flat_map(|r| (0..cols).map(move |c| start + r * row_stride + c * col_stride)).collect();
        let mut p = Predictor::new(OnlineConfig::default());
        let hits = observe_all(&mut p, &offsets, 8);
        prop_assert!(locked_from(&hits) as u64 <= 2 * cols + 3, "{}x{}: {:?}", rows, cols, hits);
        prop_assert_eq!(p.following(), Following::KdStrided);
    }

    #[test]
    fn random_requests_do_not_break_a_locked_pattern(
        start in 0u64..1 << 30, stride in 1u64..1 << 20, noise in proptest::collection::vec(any::<bool>(), 80),
        far in 1u64 << 50..1 << 60,
    ) {
        let mut p = Predictor::new(OnlineConfig::default());
        observe_all(&mut p, &(0..8).map(|i| start + i * stride).collect::<Vec<_>>(), 64);
        let (mut expected, mut predicted) = (0, 0);
        let mut i = 8u64;
        let mut last_was_noise = false;
        for (j, &noisy) in noise.iter().enumerate() {
            // At most one random request at a time, about one in ten requests.
            if noisy && j % 10 == 0 && !last_was_noise {
                p.observe(far + j as u64 * 7919, 64);
                last_was_noise = true;
                continue;
            }
            last_was_noise = false;
            expected += 1;
            predicted += p.observe(start + i * stride, 64) as u32;
            i += 1;
        }
        prop_assert_eq!(predicted, expected);
    }

    #[test]
    fn a_real_change_is_followed_within_a_few_requests(
        a in 0u64..1 << 30, sa in 1u64..1 << 20, b in 1u64 << 40..1 << 41, sb in 1u64..1 << 20,
    ) {
        prop_assume!(sa != sb);
        let mut p = Predictor::new(OnlineConfig::default());
        observe_all(&mut p, &(0..30).map(|i| a + i * sa).collect::<Vec<_>>(), 64);
        let hits = observe_all(&mut p, &(0..30).map(|i| b + i * sb).collect::<Vec<_>>(), 64);
        prop_assert!(locked_from(&hits) <= 6, "{:?}", hits);
    }

    #[test]
    fn saved_patterns_predict_a_new_run_from_its_second_request(
        rows in 4u64..7, cols in 4u64..10, col_stride in 1u64..5_000, gap in 1u64..100_000, shift in 0u64..1 << 40,
    ) {
        prop_assume!(gap != col_stride);
        let row_stride = (cols - 1) * col_stride + gap;
        let grid: Vec<u64> = (0..rows).flat_map(|r| (0..cols).map(move |c| r * row_stride + c * col_stride)).collect();
        let mut first = Predictor::new(OnlineConfig::default());
        observe_all(&mut first, &grid, 8);
        let mut second = Predictor::load(OnlineConfig::default(), &first.save()).unwrap();
        let shifted: Vec<u64> = grid.iter().map(|o| o + shift).collect();
        let hits = observe_all(&mut second, &shifted, 8);
        prop_assert!(hits[1..].iter().all(|&h| h), "{:?}", hits);
    }
}

#[test]
fn model_stays_small() {
    let mut p = Predictor::new(OnlineConfig::default());
    for i in 0..10_000u64 {
        p.observe((i * 7919 * 4096) % (1 << 40), 4096);
    }
    assert!(p.model_bytes() < 4096, "{} bytes", p.model_bytes());
}
