//! Index records as a format: any entry list round-trips through `record::encode` /
//! `record::decode` in both modes (pattern records taking the block-coded kind when it
//! is smaller), and truncated or damaged payloads give an error, never a panic.

use patio_container::record::{decode, encode, IndexEntry};
use patio_container::IndexMode;
use patio_core::Detector;
use proptest::prelude::*;
use std::path::Path;

/// Entry lists mixing strided runs and irregular writes, as writers leave them.
fn entries() -> impl Strategy<Value = Vec<IndexEntry>> {
    let irregular = prop::collection::vec((0u64..1 << 40, 1u64..1 << 20), 0..300).prop_map(|v| {
        let mut phys = 0;
        v.into_iter()
            .map(|(logical, length)| {
                let e = IndexEntry {
                    logical,
                    length,
                    physical: phys,
                };
                phys += length;
                e
            })
            .collect::<Vec<_>>()
    });
    let strided = (1u64..1000, 1u64..64, 1u64..8, 0u64..1 << 30).prop_map(|(n, s, l, base)| {
        (0..n)
            .map(|i| IndexEntry {
                logical: base + i * s * 4096,
                length: l * 512,
                physical: i * l * 512,
            })
            .collect::<Vec<_>>()
    });
    prop_oneof![irregular, strided]
}

fn expand(payload: &[u8]) -> Vec<IndexEntry> {
    let r = decode(Path::new("x"), 0, payload).unwrap();
    (0..r.columns.len()).map(|i| r.columns.get(i)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn records_round_trip(e in entries(), key in any::<u64>(), extra in 0u64..5) {
        let d = Detector::default();
        for mode in [IndexMode::Pattern, IndexMode::Raw] {
            let writes = e.len() as u64 + extra;
            let payload = encode(mode, key, writes, &e, &d);
            let r = decode(Path::new("x"), 0, &payload).unwrap();
            prop_assert_eq!(r.key, key);
            prop_assert_eq!(r.writes, writes);
            prop_assert_eq!(expand(&payload), e.clone());
        }
    }

    #[test]
    fn damaged_records_never_panic(e in entries(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let d = Detector::default();
        let payload = encode(IndexMode::Pattern, 9, e.len() as u64, &e, &d);
        for cut in (0..payload.len()).step_by(1 + payload.len() / 64) {
            prop_assert!(decode(Path::new("x"), 0, &payload[..cut]).is_err());
        }
        let mut bad = payload.clone();
        let i = at.index(bad.len());
        bad[i] ^= byte | 1;
        if let Ok(r) = decode(Path::new("x"), 0, &bad) {
            prop_assert!(r.columns.len() <= patio_container::record::MAX_RECORD_WRITES);
        }
    }
}

/// Irregular records take the coded kind (3) and are smaller than the plain kind;
/// strided ones stay kind 1.
#[test]
fn irregular_records_are_coded_strided_ones_stay_plain() {
    let d = Detector::default();
    let irregular: Vec<IndexEntry> = (0..5000u64)
        .map(|i| IndexEntry {
            logical: (i * 7919 % 5000) * 65536 + (i % 3) * 512,
            length: 4096 + (i % 5) * 512,
            physical: i * 8192,
        })
        .collect();
    let coded = encode(IndexMode::Pattern, 1, 5000, &irregular, &d);
    assert_eq!(coded[0], 3);
    assert_eq!(expand(&coded), irregular);
    let strided: Vec<IndexEntry> = (0..5000u64)
        .map(|i| IndexEntry {
            logical: i * 8 * 4096,
            length: 4096,
            physical: i * 4096,
        })
        .collect();
    let plain = encode(IndexMode::Pattern, 1, 5000, &strided, &d);
    assert_eq!(plain[0], 1);
    assert_eq!(expand(&plain), strided);
}
