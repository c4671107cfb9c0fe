//! Property tests of `PatternMap` and `ExtentTable` against a byte-level reference
//! model — the definition of correctness: a vector with one slot per logical byte of a
//! small address space, filled by applying the extents in write order (later extents
//! overwrite earlier bytes). For every offset `x` in `0..end+5` the expected lookup is
//! derived from the model alone:
//!
//! * `Data { chunk, physical, len }` — `len` is the maximal run of bytes from `x` that
//!   stay in the same chunk with the physical offset going up by one each byte
//!   (normalised extents are coalesced maximally, so this is also "to the end of the
//!   normalised extent");
//! * `Hole { len }` — distance to the next mapped byte;
//! * `Unmapped` — no mapped byte at or after `x`.
//!
//! Both `PatternMap::lookup` (every detector window 1..=40) and `ExtentTable::lookup`
//! must equal it — at small offsets and with the whole layout shifted flush against
//! 2^63 - 1, the largest end a map accepts (offsets past it are `Unmapped`). Also: `map.extents() == table.extents()`; `PatternMap::merge` of
//! per-chunk maps answers like the model of the per-chunk extents applied map after
//! map (and like the map of the union when chunks do not overlap); encode/decode round
//! trips of both structures; decoding truncated, bit-flipped and — past the
//! checksum — payload-mutated encodings never panics (truncations are `Err`), and
//! whatever does decode answers lookups without panicking.
//!
//! Extents come random (small offsets, lengths including 0, overlaps, holes, several
//! chunks, physical offsets and chunk ids near `u64::MAX` and across `2^63`) and
//! structured (N-1 strided across W writers, per-writer strided with holes, in order
//! or shuffled, with random overwrites on top).

mod common;

use common::*;
use patio_core::codec;
use patio_core::{Detector, Extent, ExtentTable, Lookup, PatternMap};
use proptest::prelude::*;
use proptest::sample::Index;

/// The reference: one slot per byte, `(chunk, physical)`.
struct Model {
    base: u64,
    bytes: Vec<Option<(u64, u64)>>,
    /// `run[i]`: maximal contiguous run starting at byte i (0 for unmapped bytes).
    run: Vec<u64>,
    /// `next[i]`: index of the first mapped byte at or after i, if any.
    next: Vec<Option<usize>>,
}

impl Model {
    fn new(base: u64, extents: &[Extent]) -> Self {
        let size = extents
            .iter()
            .map(|e| (e.logical - base + e.length) as usize)
            .max()
            .unwrap_or(0);
        let mut bytes = vec![None; size];
        for e in extents {
            for b in 0..e.length {
                bytes[(e.logical - base + b) as usize] = Some((e.chunk, e.physical + b));
            }
        }
        let mut run = vec![0u64; size + 1];
        let mut next = vec![None; size + 1];
        for i in (0..size).rev() {
            next[i] = if bytes[i].is_some() {
                Some(i)
            } else {
                next[i + 1]
            };
            if let Some((c, p)) = bytes[i] {
                run[i] = 1 + match bytes.get(i + 1).copied().flatten() {
                    Some((c2, p2)) if c2 == c && p.checked_add(1) == Some(p2) => run[i + 1],
                    _ => 0,
                };
            }
        }
        Model {
            base,
            bytes,
            run,
            next,
        }
    }

    fn end(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    fn lookup(&self, x: u64) -> Lookup {
        if x < self.base {
            return match self.next[0] {
                Some(n) => Lookup::Hole {
                    len: self.base + n as u64 - x,
                },
                None => Lookup::Unmapped,
            };
        }
        let i = x - self.base;
        if i >= self.bytes.len() as u64 {
            return Lookup::Unmapped;
        }
        let i = i as usize;
        match self.bytes[i] {
            Some((chunk, physical)) => Lookup::Data {
                chunk,
                physical,
                len: self.run[i],
            },
            None => match self.next[i] {
                Some(n) => Lookup::Hole {
                    len: (n - i) as u64,
                },
                None => Lookup::Unmapped,
            },
        }
    }
}

fn physical_base() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => 0u64..100_000,
        1 => (u64::MAX - 200_000)..(u64::MAX - 20_000),
        1 => (i64::MAX as u64 - 30_000)..(i64::MAX as u64 + 30_000),
    ]
    .boxed()
}

fn chunk_id() -> BoxedStrategy<u64> {
    prop_oneof![
        6 => 0u64..4,
        1 => Just(u64::MAX),
        1 => Just(i64::MAX as u64),
        1 => Just(i64::MAX as u64 + 1),
    ]
    .boxed()
}

fn random_extent() -> BoxedStrategy<Extent> {
    (
        0u64..3000,
        prop_oneof![Just(0u64), 1u64..16, 1u64..300],
        physical_base(),
        chunk_id(),
    )
        .prop_map(|(l, n, p, c)| Extent::new(l, n, p, c))
        .boxed()
}

/// N-1 strided: write i of writer w at `(i·W + w)·block`, physically appended per writer.
fn n1_strided() -> BoxedStrategy<Vec<Extent>> {
    (
        1u64..8,
        1u64..12,
        1u64..64,
        0u64..64,
        physical_base(),
        any::<bool>(),
    )
        .prop_map(|(writers, writes, block, gap, pbase, writer_major)| {
            let mut out = Vec::new();
            let stride = block + gap;
            let one = |i: u64, w: u64| {
                Extent::new((i * writers + w) * stride, block, pbase + i * block, w)
            };
            if writer_major {
                for w in 0..writers {
                    for i in 0..writes {
                        out.push(one(i, w));
                    }
                }
            } else {
                for i in 0..writes {
                    for w in 0..writers {
                        out.push(one(i, w));
                    }
                }
            }
            out
        })
        .boxed()
}

/// Per-writer strided with holes: each writer owns a region and writes every other block.
fn per_writer_strided() -> BoxedStrategy<Vec<Extent>> {
    (1u64..6, 1u64..20, 1u64..40, 1u64..40, physical_base())
        .prop_map(|(writers, writes, block, hole, pbase)| {
            let region = writes * (block + hole);
            (0..writers)
                .flat_map(|w| {
                    (0..writes).map(move |i| {
                        Extent::new(w * region + i * (block + hole), block, pbase + i * block, w)
                    })
                })
                .collect()
        })
        .boxed()
}

fn extents() -> BoxedStrategy<Vec<Extent>> {
    let structured = prop_oneof![n1_strided(), per_writer_strided()];
    prop_oneof![
        3 => prop::collection::vec(random_extent(), 0..40),
        2 => structured.clone(),
        // Structured writes shuffled, then random overwrites on top.
        2 => (structured, prop::collection::vec(any::<Index>(), 0..8), prop::collection::vec(random_extent(), 0..6))
            .prop_map(|(mut ex, swaps, extra)| {
                let n = ex.len();
                for (k, s) in swaps.iter().enumerate() {
                    if n > 0 { ex.swap(k % n, s.index(n)); }
                }
                ex.extend(extra);
                ex
            }),
        // Sequential appends that coalesce, some re-written with the same mapping.
        1 => (1u64..30, 1u64..50, physical_base(), 0u64..3, prop::collection::vec(any::<Index>(), 0..4))
            .prop_map(|(n, len, p, chunk, rewrite)| {
                let mut ex: Vec<Extent> = (0..n).map(|i| Extent::new(i * len, len, p + i * len, chunk)).collect();
                for r in rewrite {
                    let e = ex[r.index(ex.len())];
                    ex.push(e);
                }
                ex
            }),
    ]
    .boxed()
}

fn shift(extents: &[Extent], base: u64) -> Vec<Extent> {
    extents
        .iter()
        .map(|e| Extent {
            logical: e.logical + base,
            ..*e
        })
        .collect()
}

fn check_lookups(
    map: &PatternMap,
    table: &ExtentTable,
    model: &Model,
    what: &str,
) -> Result<(), TestCaseError> {
    let end = model.end();
    let mut xs: Vec<u64> = (model.base..end + 5).collect();
    xs.extend([
        0,
        model.base.saturating_sub(1),
        i64::MAX as u64,
        i64::MAX as u64 + 1,
        u64::MAX,
    ]);
    for x in xs {
        let want = model.lookup(x);
        prop_assert_eq!(map.lookup(x), want, "{}: PatternMap::lookup({})", what, x);
        prop_assert_eq!(
            table.lookup(x),
            want,
            "{}: ExtentTable::lookup({})",
            what,
            x
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn lookups_match_the_byte_model(ex in extents(), w in window()) {
        let model = Model::new(0, &ex);
        let map = PatternMap::build(&ex, &Detector::new(w)).unwrap();
        let table = ExtentTable::build(&ex);
        check_lookups(&map, &table, &model, "map")?;
        prop_assert_eq!(map.extents().collect::<Vec<_>>(), table.extents().to_vec());
        prop_assert_eq!(map.end(), table.extents().last().map_or(0, |e| e.end()));
        prop_assert_eq!(map.end(), model.end() - model.bytes.iter().rev().take_while(|b| b.is_none()).count() as u64);
        prop_assert_eq!(map.stats().extents, table.len() as u64);
    }

    /// The same just below 2^63, where the map's i64 logical column is at its edge.
    #[test]
    fn lookups_near_2_pow_63(ex in extents(), w in window(), flush in any::<bool>()) {
        // Flush against 2^63 - 1 (the largest end the map accepts), or a little below.
        let top = ex.iter().map(|e| e.end()).max().unwrap_or(0);
        let base = i64::MAX as u64 - top - if flush { 0 } else { 4096 };
        let ex = shift(&ex, base);
        let model = Model::new(base, &ex);
        let map = PatternMap::build(&ex, &Detector::new(w)).unwrap();
        let table = ExtentTable::build(&ex);
        check_lookups(&map, &table, &model, "near 2^63")?;
        prop_assert_eq!(map.extents().collect::<Vec<_>>(), table.extents().to_vec());
    }

    #[test]
    fn merge_of_per_chunk_maps(ex in extents(), w in window()) {
        let d = Detector::new(w);
        let mut chunks: Vec<u64> = ex.iter().map(|e| e.chunk).collect();
        chunks.sort_unstable();
        chunks.dedup();
        let per_chunk: Vec<Vec<Extent>> = chunks.iter().map(|&c| ex.iter().copied().filter(|e| e.chunk == c).collect()).collect();
        let maps: Vec<PatternMap> = per_chunk.iter().map(|v| PatternMap::build(v, &d).unwrap()).collect();
        let merged = PatternMap::merge(&maps, &d).unwrap();
        // Later maps win: the model of the per-chunk extents applied map after map.
        let grouped: Vec<Extent> = per_chunk.concat();
        let model = Model::new(0, &grouped);
        let table = ExtentTable::build(&grouped);
        check_lookups(&merged, &table, &model, "merge")?;
        // When no two chunks' extents overlap, that is the map of the union in write order.
        let owners = Model::new(0, &ex);
        let disjoint = per_chunk.iter().all(|v| Model::new(0, v).bytes.iter().enumerate()
            .all(|(i, b)| b.is_none() || owners.bytes[i] == *b));
        if disjoint {
            let union = PatternMap::build(&ex, &d).unwrap();
            prop_assert_eq!(merged.extents().collect::<Vec<_>>(), union.extents().collect::<Vec<_>>());
            check_lookups(&union, &ExtentTable::build(&ex), &owners, "union")?;
        }
    }

    #[test]
    fn map_encoding_round_trips(ex in extents(), w in window()) {
        let map = PatternMap::build(&ex, &Detector::new(w)).unwrap();
        let bytes = map.encode();
        let back = PatternMap::decode(&bytes);
        prop_assert!(back.is_ok(), "{:?}", back);
        let back = back.unwrap();
        prop_assert_eq!(&back, &map);
        let model = Model::new(0, &ex);
        check_lookups(&back, &ExtentTable::build(&ex), &model, "decoded map")?;
        for cut in 0..bytes.len() {
            prop_assert!(PatternMap::decode(&bytes[..cut]).is_err(), "map prefix {} of {} decoded", cut, bytes.len());
        }
    }

    #[test]
    fn table_encoding_round_trips(ex in extents()) {
        let table = ExtentTable::build(&ex);
        let bytes = table.encode();
        let back = ExtentTable::decode(&bytes);
        prop_assert!(back.is_ok(), "{:?}", back);
        prop_assert_eq!(back.unwrap(), table);
        for cut in 0..bytes.len() {
            prop_assert!(ExtentTable::decode(&bytes[..cut]).is_err(), "table prefix {} decoded", cut);
        }
    }

    #[test]
    fn damaged_map_encodings_never_panic(ex in extents(), w in window(), flips in prop::collection::vec((any::<Index>(), 0u8..8), 1..12), probes in prop::collection::vec(0u64..4000, 8)) {
        let bytes = PatternMap::build(&ex, &Detector::new(w)).unwrap().encode();
        for &(at, bit) in &flips {
            let mut b = bytes.clone();
            let i = at.index(b.len());
            b[i] ^= 1 << bit;
            if let Ok(m) = PatternMap::decode(&b) { poke_map(&m, &probes); }
        }
    }

    #[test]
    fn damaged_table_encodings_never_panic(ex in extents(), flips in prop::collection::vec((any::<Index>(), 0u8..8), 1..12), probes in prop::collection::vec(0u64..4000, 8)) {
        let bytes = ExtentTable::build(&ex).encode();
        for &(at, bit) in &flips {
            let mut b = bytes.clone();
            let i = at.index(b.len());
            b[i] ^= 1 << bit;
            if let Ok(t) = ExtentTable::decode(&b) { poke_table(&t, &probes); }
        }
    }

    /// Damage the checksum cannot catch (a buggy writer, a crafted file): mutate the
    /// map payload and re-seal the blob.
    #[test]
    fn resealed_map_damage_never_panics(ex in extents(), w in window(), edits in edits(), probes in prop::collection::vec(0u64..4000, 8)) {
        let bytes = PatternMap::build(&ex, &Detector::new(w)).unwrap().encode();
        let sealed = reseal(b"PMAP", &bytes, &edits);
        if let Ok(m) = PatternMap::decode(&sealed) { poke_map(&m, &probes); }
    }

    /// The same for the extent table.
    #[test]
    fn resealed_table_damage_never_panics(ex in extents(), edits in edits(), probes in prop::collection::vec(0u64..4000, 8)) {
        let sealed = reseal(b"PXTB", &ExtentTable::build(&ex).encode(), &edits);
        if let Ok(t) = ExtentTable::decode(&sealed) { poke_table(&t, &probes); }
    }
}

/// Payload edits: `(where, byte, kind)` with kind 0 = overwrite, 1 = insert, 2 = delete.
fn edits() -> BoxedStrategy<Vec<(Index, u8, u8)>> {
    prop::collection::vec(
        (
            any::<Index>(),
            prop_oneof![any::<u8>(), Just(0u8), Just(0xffu8), Just(0x7fu8)],
            0u8..3,
        ),
        1..6,
    )
    .boxed()
}

fn reseal(magic: &[u8; 4], blob: &[u8], edits: &[(Index, u8, u8)]) -> Vec<u8> {
    let mut payload = blob[codec::BLOB_HEADER..].to_vec();
    for &(at, v, kind) in edits {
        match kind {
            0 if !payload.is_empty() => {
                let i = at.index(payload.len());
                payload[i] = v;
            }
            1 => {
                let i = at.index(payload.len() + 1);
                payload.insert(i, v);
            }
            _ if !payload.is_empty() => {
                let i = at.index(payload.len());
                payload.remove(i);
            }
            _ => {}
        }
    }
    codec::write_blob(magic, 1, &payload)
}

fn poke_map(m: &PatternMap, probes: &[u64]) {
    for &x in probes.iter().chain(&[0, i64::MAX as u64, u64::MAX]) {
        let _ = m.lookup(x);
    }
    let _ = m.end();
    let _ = m.stats();
    let _ = m.extents().take(1000).count();
}

fn poke_table(t: &ExtentTable, probes: &[u64]) {
    for &x in probes.iter().chain(&[0, i64::MAX as u64, u64::MAX]) {
        let _ = t.lookup(x);
    }
}
