//! `Reader::read_extents` against a byte-array model: any list of extents reads the
//! right bytes (holes as zeros), and pieces of one data log are read together across
//! small forward gaps (data sieving) in disk order, but not across large gaps. A plan
//! (`plan_extents` + `read_plan`) reads the same bytes with the same reads, in the
//! order its places give, and calls its hook around each of them.

use patio_container::reader::SIEVE_GAP;
use patio_container::{IndexMode, Reader, Writer};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_extents_read_the_model(
        writes in prop::collection::vec((0u64..200_000, 1u64..5_000, any::<u8>()), 1..30),
        extents in prop::collection::vec((0u64..210_000, 0u64..20_000), 1..20),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        let mut w = Writer::create(&path, IndexMode::Pattern).unwrap();
        let mut model = Vec::new();
        for &(o, l, v) in &writes {
            w.write_at(o, &vec![v; l as usize]).unwrap();
            let end = (o + l) as usize;
            if end > model.len() { model.resize(end, 0); }
            model[o as usize..end].fill(v);
        }
        w.close().unwrap();
        let r = Reader::open(&path).unwrap();
        let size = model.len() as u64;
        let ext: Vec<(u64, u64)> = extents
            .iter()
            .map(|&(o, l)| (o.min(size), l.min(size - o.min(size))))
            .collect();
        let want: Vec<u8> = ext.iter().flat_map(|&(o, l)| model[o as usize..(o + l) as usize].iter().copied()).collect();
        let mut buf = vec![0xAAu8; want.len()];
        let reads = r.read_extents(&ext, &mut buf).unwrap();
        prop_assert_eq!(&buf, &want);
        prop_assert!(reads <= ext.iter().filter(|e| e.1 > 0).count() as u64 * writes.len() as u64);

        let plan = r.plan_extents(&ext).unwrap();
        let places = plan.places();
        prop_assert_eq!(plan.bytes(), want.len());
        prop_assert_eq!(places.len() as u64, reads);
        prop_assert!(places.windows(2).all(|w| (w[0].chunk, w[0].start) <= (w[1].chunk, w[1].start)));
        let mut calls = Vec::new();
        let mut again = vec![0x55u8; want.len()];
        let n = r.read_plan(&plan, &mut again, |i, after| { calls.push((i, after)); Ok(()) }).unwrap();
        prop_assert_eq!(n, reads);
        prop_assert_eq!(&again, &want);
        let expected: Vec<(usize, bool)> = (0..places.len()).flat_map(|i| [(i, false), (i, true)]).collect();
        prop_assert_eq!(calls, expected);
        if !places.is_empty() {
            let stop = places.len() - 1;
            let failed = r.read_plan(&plan, &mut again, |i, _| {
                if i == stop { Err(patio_container::ContainerError::Invalid("stopped".into())) } else { Ok(()) }
            });
            prop_assert!(failed.is_err());
        }
    }
}

#[test]
fn small_gaps_are_sieved_in_disk_order_large_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c");
    let mut w = Writer::create(&path, IndexMode::Pattern).unwrap();
    let size = 4 * SIEVE_GAP as usize;
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    w.write_at(0, &data).unwrap();
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    let read = |ext: &[(u64, u64)]| {
        let mut buf = vec![0u8; ext.iter().map(|e| e.1 as usize).sum()];
        let n = r.read_extents(ext, &mut buf).unwrap();
        let want: Vec<u8> = ext
            .iter()
            .flat_map(|&(o, l)| data[o as usize..(o + l) as usize].to_vec())
            .collect();
        assert_eq!(buf, want);
        n
    };
    // 90 % of every 64 KiB: one read.
    let smaller: Vec<(u64, u64)> = (0..8).map(|i| (i * 65536, 58982)).collect();
    assert_eq!(read(&smaller), 1);
    // Contiguous: one read.
    assert_eq!(read(&[(0, 1000), (1000, 5000)]), 1);
    // A gap beyond SIEVE_GAP: two reads. Extents in any order are read in disk order:
    // backwards, or alternating between two places, is one read per place.
    assert_eq!(read(&[(0, 10), (SIEVE_GAP + 11, 10)]), 2);
    assert_eq!(read(&[(5000, 10), (0, 10)]), 1);
    let far = 3 * SIEVE_GAP;
    let alternating: Vec<(u64, u64)> = (0..6)
        .flat_map(|i| [(i * 100, 50), (far + i * 100, 50)])
        .collect();
    assert_eq!(read(&alternating), 2);
}
