//! The stream set's fixed costs on small and degenerate traces, asserted: a stream
//! that is one pattern costs at most 8 bytes (alone or among others), the head and
//! block table at most 16 bytes plus 4 per block (also when blocks are large), and a
//! small set is one block — on the synthetic extremes (4 streams × 65,536 identical
//! requests, a lone one-pattern stream, 1 stream × 1 request, 64 streams × 3
//! requests, no streams). Degenerate sets round-trip (property), damaged or truncated
//! ones are typed errors naming a byte, and sets written by versions 1 and 2 still
//! read.
//! The comparison with generic compressors on the same sets is
//! `tests/test_streamset_traces.py` (through `patio analyze`).

use patio_core::blockset::{decode, encode, Options, StreamSet};
use patio_core::Detector;
use proptest::prelude::*;

mod common;

type Streams = Vec<(Vec<u64>, Vec<u64>)>;

/// Fixed part: head, checksum and block table, at most.
const FIXED: usize = 16;
const PER_BLOCK: usize = 4;
/// A stream that is one pattern, at most.
const PER_PATTERN_STREAM: usize = 8;
/// What a one-block set spends beside its streams: head, CRC32C, stream count and
/// the block's form byte.
const ONE_BLOCK_FIXED: usize = 7;

fn encoded(streams: &Streams) -> Vec<u8> {
    let views: Vec<(&[u64], &[u64])> = streams
        .iter()
        .map(|(o, l)| (o.as_slice(), l.as_slice()))
        .collect();
    encode(&views, &Detector::default(), &Options::default())
}

/// Encodes, checks the round trip and one-request queries, and returns the set's
/// size and block count.
fn size_and_blocks(streams: &Streams) -> (usize, usize) {
    let bytes = encoded(streams);
    assert_eq!(decode(&bytes).unwrap(), *streams);
    let set = StreamSet::open(&bytes).unwrap();
    for (k, (o, l)) in streams.iter().enumerate() {
        if let Some(last) = o.len().checked_sub(1) {
            let a = set.request(k, last as u64).unwrap();
            assert_eq!(a.requests, vec![(o[last], l[last])]);
            assert_eq!(a.blocks_decoded, 1);
        }
    }
    (bytes.len(), set.blocks().len())
}

/// `n` identical requests per stream, stream `k` at its own offset and length.
fn identical(streams: u64, n: usize) -> Streams {
    (0..streams)
        .map(|k| (vec![(k + 1) << 30; n], vec![(k + 1) << 20; n]))
        .collect()
}

#[test]
fn four_streams_of_65536_identical_requests_cost_a_few_bytes_each() {
    let (size, blocks) = size_and_blocks(&identical(4, 65_536));
    assert_eq!(blocks, 1, "a small set is one block");
    assert!(
        size <= FIXED + PER_BLOCK + 4 * PER_PATTERN_STREAM,
        "{size} bytes"
    );
    // The same with the streams repeated (POSIX under MPI-IO): copies cost little.
    let mut twice = identical(4, 65_536);
    twice.extend(identical(4, 65_536));
    let (size, blocks) = size_and_blocks(&twice);
    assert_eq!(blocks, 1);
    assert!(
        size <= FIXED + PER_BLOCK + 8 * PER_PATTERN_STREAM,
        "{size} bytes"
    );
}

#[test]
fn a_lone_one_pattern_stream_costs_a_few_bytes() {
    // A request repeated, a constant stride, a cycle of two steps: each one pattern,
    // with offsets and sizes multiples of powers of two, as I/O has them.
    let n = 65_536u64;
    let cases: Streams = vec![
        identical(1, n as usize).remove(0),
        (
            (0..n).map(|i| (3 << 30) + i * 4096).collect(),
            vec![4096; n as usize],
        ),
        (
            (0..n)
                .map(|i| (i / 2) * (1 << 20) + (i % 2) * 512)
                .collect(),
            vec![512; n as usize],
        ),
    ];
    for stream in cases {
        let (size, blocks) = size_and_blocks(&vec![stream.clone()]);
        assert_eq!(blocks, 1);
        assert!(
            size <= ONE_BLOCK_FIXED + PER_PATTERN_STREAM,
            "{size} bytes for {:?}",
            &stream.0[..3]
        );
    }
    // Among other streams, as the set's only content: the same bound per stream.
    let (size, _) = size_and_blocks(&identical(16, 4096));
    assert!(
        size <= ONE_BLOCK_FIXED + 16 * PER_PATTERN_STREAM,
        "{size} bytes"
    );
}

#[test]
fn one_stream_of_one_request() {
    for (offset, length) in [(0, 4096), (123_456_789, 1 << 20), (u64::MAX, u64::MAX)] {
        let (size, blocks) = size_and_blocks(&vec![(vec![offset], vec![length])]);
        assert_eq!(blocks, 1);
        // The record itself (up to 20 bytes of varints) beyond the fixed part.
        assert!(size <= FIXED + PER_BLOCK + 20, "{size} bytes");
    }
    let (size, _) = size_and_blocks(&vec![(vec![0], vec![4096])]);
    assert!(
        size <= FIXED + PER_BLOCK + PER_PATTERN_STREAM,
        "{size} bytes"
    );
}

#[test]
fn sixty_four_streams_of_three_requests() {
    // Rank-strided: rank r writes blocks r, r + 64, r + 128 of 4 KiB.
    let streams: Streams = (0..64u64)
        .map(|r| ((0..3).map(|i| (i * 64 + r) * 4096).collect(), vec![4096; 3]))
        .collect();
    let (size, blocks) = size_and_blocks(&streams);
    assert_eq!(blocks, 1);
    assert!(
        size <= FIXED + PER_BLOCK + 64 * PER_PATTERN_STREAM,
        "{size} bytes"
    );
    // Ranks that differ only by their place share everything but a column: far less.
    assert!(size <= 64, "{size} bytes");
}

#[test]
fn sets_without_requests_are_the_fixed_part() {
    for streams in [vec![], vec![(vec![], vec![]); 3]] {
        let (size, blocks) = size_and_blocks(&streams);
        assert_eq!(blocks, 0);
        assert!(size <= FIXED, "{size} bytes");
    }
}

#[test]
fn a_set_of_many_blocks_has_a_small_table() {
    // More requests than one block holds, in streams of one request each (no stream
    // spans blocks, so the table gives no offset ranges).
    let n = patio_core::blockset::MAX_BLOCK_REQUESTS as u64 + 1;
    let streams: Streams = (0..n).map(|i| (vec![i * 4096], vec![4096])).collect();
    let bytes = encoded(&streams);
    let set = StreamSet::open(&bytes).unwrap();
    let blocks = set.blocks();
    assert!(blocks.len() > 1);
    assert!(
        blocks.iter().all(|b| (b.lo, b.hi) == (0, u64::MAX)),
        "no ranges"
    );
    // Head, checksum, index lengths, stream count and the constant count column (a
    // few bytes), then the table.
    let table = blocks[0].at;
    assert!(
        table <= FIXED + PER_BLOCK * blocks.len(),
        "{table} bytes for {} blocks",
        blocks.len()
    );
    assert_eq!(set.decode_all().unwrap(), streams);
    let a = set.request(n as usize - 1, 0).unwrap();
    assert_eq!(a.requests, vec![((n - 1) * 4096, 4096)]);
    assert_eq!(a.blocks_decoded, 1);
}

/// A pseudo-random sequence (64-bit LCG, high bits).
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *seed >> 33
}

#[test]
fn a_table_of_large_blocks_stays_within_four_bytes_per_block() {
    // Random offsets and sizes: blocks of tens of kilobytes, entropy coding can do
    // little; one request per stream, so the table gives no offset ranges.
    let mut seed = 15;
    let streams: Streams = (0..40_000)
        .map(|_| {
            (
                vec![lcg(&mut seed) << 9],
                vec![1 + lcg(&mut seed) % (1 << 20)],
            )
        })
        .collect();
    let bytes = encoded(&streams);
    let set = StreamSet::open(&bytes).unwrap();
    let blocks = set.blocks();
    assert!(blocks.len() > 1);
    assert!(blocks.iter().all(|b| b.len > 2048), "blocks over 2 KiB");
    let table = blocks[0].at;
    assert!(
        table <= FIXED + PER_BLOCK * blocks.len(),
        "{table} bytes for {} blocks",
        blocks.len()
    );
    assert_eq!(set.decode_all().unwrap(), streams);
}

/// The streams of `data/v2_one_block.set` (64 rank-strided streams of 3 requests, a
/// quadratic stream, a repeated request, a copy of the first stream).
fn v2_one_block() -> Streams {
    let mut s: Streams = (0..64u64)
        .map(|r| ((0..3).map(|i| (i * 64 + r) * 4096).collect(), vec![4096; 3]))
        .collect();
    s.push((
        (0..1000u64).map(|i| i * i * 7).collect(),
        (0..1000u64).map(|i| i % 13 + 1).collect(),
    ));
    s.push((vec![1 << 30; 65_536], vec![1 << 20; 65_536]));
    s.push(s[0].clone());
    s
}

/// The streams of `data/v2_blocks.set` (a strided stream spanning blocks and a
/// random one).
fn v2_blocks() -> Streams {
    let mut seed = 29u64;
    let a = (
        (0..300_000u64).map(|i| i * 4096).collect(),
        vec![4096; 300_000],
    );
    let b = (
        (0..800).map(|_| lcg(&mut seed) << 9).collect(),
        (0..800).map(|_| 1 + lcg(&mut seed) % 70_000).collect(),
    );
    vec![a, b]
}

#[test]
fn version_2_sets_still_read() {
    // Written by the version 2 encoder (commit b3475be) from the streams above.
    let cases: [(&[u8], Streams); 2] = [
        (include_bytes!("data/v2_one_block.set"), v2_one_block()),
        (include_bytes!("data/v2_blocks.set"), v2_blocks()),
    ];
    for (bytes, want) in cases {
        let set = StreamSet::open(bytes).unwrap();
        assert_eq!(set.version(), 2);
        assert_eq!(set.decode_all().unwrap(), want);
        for (k, (o, l)) in want.iter().enumerate() {
            let i = o.len() / 2;
            assert_eq!(
                set.request(k, i as u64).unwrap().requests,
                vec![(o[i], l[i])]
            );
            let a = set.touching(k, o[i]).unwrap();
            assert!(a.requests.contains(&(o[i], l[i])));
        }
    }
    common::set_refuses_damage(include_bytes!("data/v2_one_block.set"));
    // The multi-block set's offset ranges still narrow a query to one block.
    let set = StreamSet::open(include_bytes!("data/v2_blocks.set")).unwrap();
    assert!(set.blocks().len() > 1);
    assert_eq!(
        set.touching(0, 4096 * 299_990 + 5).unwrap().blocks_decoded,
        1
    );
}

#[test]
fn a_long_stream_spans_blocks_and_offsets_find_one() {
    let n = 600_000u64;
    let streams: Streams = vec![((0..n).map(|i| i * 4096).collect(), vec![4096; n as usize])];
    let bytes = encoded(&streams);
    let set = StreamSet::open(&bytes).unwrap();
    assert!(set.blocks().len() > 1);
    assert_eq!(set.decode_all().unwrap(), streams);
    let x = 4096 * (n - 3) + 7;
    let a = set.touching(0, x).unwrap();
    assert_eq!(a.requests, vec![(4096 * (n - 3), 4096)]);
    assert_eq!(a.blocks_decoded, 1);
}

#[test]
fn damaged_degenerate_sets_are_errors_naming_a_byte() {
    for streams in [
        identical(4, 65_536),
        identical(1, 65_536),
        vec![(vec![0], vec![4096])],
    ] {
        let bytes = encoded(&streams);
        common::set_refuses_damage(&bytes);
    }
}

#[test]
fn version_1_sets_still_read() {
    // Written by the version 1 encoder (commit f5f71f0) from data/v1_set.csv.
    let bytes = include_bytes!("data/v1_set.ptrace");
    let index = patio_core::ptrace::Indexed::open(bytes).unwrap();
    assert_eq!(index.set.version(), 1);
    let got = patio_core::ptrace::decode(bytes).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let want = patio_core::trace::Trace::read_csv(&dir.join("v1_set.csv")).unwrap();
    assert_eq!(got.streams.len(), want.streams.len());
    for (g, w) in got.streams.iter().zip(&want.streams) {
        assert_eq!(
            (&g.key, &g.offsets, &g.lengths),
            (&w.key, &w.offsets, &w.lengths)
        );
    }
    assert!(index.set.blocks().len() == 1);
    for k in 0..index.set.streams() {
        let w = &want.streams[k];
        assert_eq!(
            index.set.stream(k).unwrap().requests,
            w.offsets
                .iter()
                .copied()
                .zip(w.lengths.iter().copied())
                .collect::<Vec<_>>()
        );
    }
}

/// Degenerate streams: empty, one request, a request repeated, a constant stride.
fn degenerate_stream() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    prop_oneof![
        Just((vec![], vec![])),
        (any::<u64>(), any::<u64>()).prop_map(|(o, l)| (vec![o], vec![l])),
        (any::<u64>(), any::<u64>(), 1usize..3000).prop_map(|(o, l, n)| (vec![o; n], vec![l; n])),
        (0u64..1 << 40, 0u64..1 << 24, 1usize..3000, 0u64..1 << 30).prop_map(
            |(base, stride, n, len)| (
                (0..n as u64).map(|i| base + i * stride).collect(),
                vec![len; n]
            )
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn degenerate_sets_round_trip(
        unique in proptest::collection::vec(degenerate_stream(), 0..70),
        copies in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ablation in 0usize..6,
    ) {
        let streams = common::with_copies(&unique, &copies);
        let opts = common::set_options(ablation);
        let views: Vec<(&[u64], &[u64])> =
            streams.iter().map(|(o, l)| (o.as_slice(), l.as_slice())).collect();
        let bytes = encode(&views, &Detector::default(), &opts);
        prop_assert_eq!(decode(&bytes).unwrap(), streams.clone());
        let set = StreamSet::open(&bytes).unwrap();
        let requests = streams.iter().any(|s| !s.0.is_empty());
        prop_assert_eq!(set.blocks().is_empty(), !requests);
        for (k, (o, l)) in streams.iter().enumerate() {
            prop_assert_eq!(set.stream_len(k).unwrap(), o.len() as u64);
            if let Some(i) = o.len().checked_sub(1) {
                prop_assert_eq!(set.request(k, i as u64).unwrap().requests, vec![(o[i], l[i])]);
            }
        }
    }
}
