//! Writes near the 2^63 limit, in both index modes: the writer refuses exactly what a
//! reader would refuse, and every write it accepted is read back (a record mixing a
//! write near 2^63 with writes near 0 is not rejected whole).

use patio_container::{IndexMode, Reader, Writer};
use proptest::prelude::*;

const LIMIT: u64 = i64::MAX as u64;

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..8192,
        (1u64..8192).prop_map(|k| LIMIT - k),
        (0u64..8192).prop_map(|k| (LIMIT / 2) + k),
    ]
}

fn check(mode: IndexMode, writes: &[(u64, u64, u8)], buffer: usize) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c");
    let mut w = Writer::create(&path, mode).unwrap();
    w.set_index_buffer(buffer);
    let mut accepted = Vec::new();
    for &(o, l, v) in writes {
        let fits = o.checked_add(l).is_some_and(|e| e <= LIMIT);
        let got = w.write_at(o, &vec![v; l as usize]);
        prop_assert_eq!(
            got.is_ok(),
            fits,
            "write of {} at {}: {:?}",
            l,
            o,
            got.err()
        );
        if fits {
            accepted.push((o, l, v));
        }
    }
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    prop_assert!(r.damage().is_empty(), "{:?}", r.damage());
    for (i, &(o, l, _)) in accepted.iter().enumerate() {
        let mut buf = vec![0u8; l as usize];
        prop_assert_eq!(r.read_at(&mut buf, o).unwrap(), l as usize);
        for (k, b) in buf.iter().enumerate() {
            let x = o + k as u64;
            // The newest accepted write covering x.
            let want = accepted[..]
                .iter()
                .rev()
                .find(|&&(wo, wl, _)| wo <= x && x < wo + wl)
                .map(|w| w.2)
                .unwrap();
            prop_assert_eq!(*b, want, "write {} byte {}", i, k);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn pattern_mode_keeps_every_accepted_write(
        writes in prop::collection::vec((offset(), 1u64..600, any::<u8>()), 1..24),
        buffer in 1usize..32,
    ) {
        check(IndexMode::Pattern, &writes, buffer)?;
    }

    #[test]
    fn raw_mode_keeps_every_accepted_write(
        writes in prop::collection::vec((offset(), 1u64..600, any::<u8>()), 1..24),
        buffer in 1usize..32,
    ) {
        check(IndexMode::Raw, &writes, buffer)?;
    }
}

#[test]
fn a_write_near_the_limit_beside_a_long_one_at_zero() {
    check(
        IndexMode::Pattern,
        &[(0, 4096, 1), (LIMIT - 3, 3, 2), (4096, 4096, 3)],
        64,
    )
    .unwrap();
}
