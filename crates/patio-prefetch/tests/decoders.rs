//! Saved prefetch models and model files never panic their decoders and never make
//! them allocate beyond a bound: markov models (`Markov::load`), pattern models
//! through the policy (`PolicyKind::build`), and per-stream model files
//! (`model::load_models`). Each gets every prefix of a valid encoding, single-byte
//! changes of it and arbitrary bytes; see `alloc_probe` for the bound.

#[path = "../../patio-core/tests/common/alloc_probe.rs"]
mod alloc_probe;

use alloc_probe::{bounded, damaged, flips};
use patio_prefetch::model::{load_models, save_models};
use patio_prefetch::pattern::Pattern;
use patio_prefetch::{Markov, PolicyKind};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Requests of a strided run with arbitrary jumps among them.
fn requests() -> impl Strategy<Value = Vec<(u64, u64)>> {
    (
        0u64..1 << 30,
        1u64..1 << 16,
        2usize..200,
        prop::collection::vec(any::<u64>(), 0..8),
    )
        .prop_map(|(base, stride, n, jumps)| {
            let mut out: Vec<(u64, u64)> =
                (0..n as u64).map(|i| (base + i * stride, 4096)).collect();
            for (k, j) in jumps.into_iter().enumerate() {
                out.insert(k * 7 % out.len(), (j >> 8, 4096));
            }
            out
        })
}

proptest! {
    #![proptest_config(Config { cases: 48, failure_persistence: None, ..Config::default() })]

    #[test]
    fn markov_and_pattern_models_and_model_files(
        reqs in requests(),
        block in prop_oneof![Just(4096u64), 1u64..1 << 20],
        flips in flips(24),
        junk in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut m = Markov::new(block);
        m.train(&reqs);
        let markov = m.save_bytes();
        damaged(&markov, &flips, true, Markov::load);
        bounded(&junk, Markov::load);

        let predictor = {
            let mut q = patio_core::online::Predictor::new(Pattern::config());
            for &(o, l) in &reqs {
                q.observe(o, l);
            }
            q
        };
        let pattern = predictor.save();
        let build = |b: &[u8]| PolicyKind::Pattern.build(&[], Some(b));
        damaged(&pattern, &flips, true, build);
        bounded(&junk, build);
        // A model of the other policy is refused as such, not decoded.
        prop_assert!(PolicyKind::Markov.build(&[], Some(&pattern)).is_err());
        prop_assert!(Pattern::load(&pattern).is_ok());

        let file = save_models(&[Some(markov), None, Some(pattern)]);
        damaged(&file, &flips, false, load_models);
        // Shorter than the magic, a prefix is a (bare, unusable) model; from the magic
        // on, every truncation is refused.
        for cut in 4..file.len() {
            prop_assert!(load_models(&file[..cut]).is_err(), "prefix of {}", cut);
        }
        // Without the file magic, bytes are a bare model: accepted as one stream.
        prop_assert_eq!(load_models(&junk).is_ok(), !junk.starts_with(b"PPMS"));
    }
}
