//! The stream-set format against its reference model (the streams themselves):
//! `decode(encode(streams)) == streams` for arbitrary stream sets and every option,
//! block-level queries equal to the same queries on the streams, and damaged or
//! truncated encodings refused with an error, never a panic.

use patio_core::blockset::{decode, encode, Options, StreamSet, MAX_BLOCK_REQUESTS};
use patio_core::Detector;
use proptest::prelude::*;

type Streams = Vec<(Vec<u64>, Vec<u64>)>;

fn views(streams: &Streams) -> Vec<(&[u64], &[u64])> {
    streams
        .iter()
        .map(|(o, l)| (o.as_slice(), l.as_slice()))
        .collect()
}

/// Every query the set answers, checked against the streams.
fn check_queries(streams: &Streams, bytes: &[u8]) {
    let set = StreamSet::open(bytes).unwrap();
    assert_eq!(set.streams(), streams.len());
    for (k, (o, l)) in streams.iter().enumerate() {
        let want: Vec<(u64, u64)> = o.iter().copied().zip(l.iter().copied()).collect();
        let all = set.stream(k).unwrap();
        assert_eq!(all.requests, want, "stream {k}");
        let step = (o.len() / 7).max(1);
        for i in (0..o.len()).step_by(step) {
            let one = set.request(k, i as u64).unwrap();
            assert_eq!(one.requests, vec![want[i]]);
            assert_eq!(one.blocks_decoded, 1);
            for x in [o[i], o[i].saturating_add(l[i] / 2), o[i].wrapping_sub(1)] {
                let touching: Vec<(u64, u64)> = want
                    .iter()
                    .copied()
                    .filter(|&(o, l)| o <= x && x - o < l)
                    .collect();
                assert_eq!(set.touching(k, x).unwrap().requests, touching, "x {x}");
            }
        }
        assert!(set.request(k, o.len() as u64).is_err());
    }
    assert!(set.stream(streams.len()).is_err());
}

/// A stream that is a mix of strided runs, repeats and noise.
fn stream_strategy() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    prop_oneof![
        // Strided with a few noisy values.
        (0u64..1 << 40, 1u64..1 << 20, 1usize..300, 1u64..70_000).prop_map(
            |(base, stride, n, len)| {
                let o = (0..n as u64)
                    .map(|i| base + i * stride + if i % 37 == 5 { 3 } else { 0 })
                    .collect();
                (o, vec![len; n])
            }
        ),
        // Arbitrary values, including the extremes.
        proptest::collection::vec((any::<u64>(), any::<u64>()), 0..60)
            .prop_map(|v| v.into_iter().unzip()),
        // Contiguous with varying lengths.
        proptest::collection::vec(1u64..10_000, 0..200).prop_map(|l| {
            let o = l
                .iter()
                .scan(0u64, |at, &x| {
                    let o = *at;
                    *at += x;
                    Some(o)
                })
                .collect();
            (o, l)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn arbitrary_sets_round_trip(
        unique in proptest::collection::vec(stream_strategy(), 0..12),
        copies in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ablation in 0usize..6,
    ) {
        let mut streams = unique.clone();
        if !unique.is_empty() {
            for c in copies {
                streams.push(unique[c.index(unique.len())].clone());
            }
        }
        let opts = match ablation {
            0 => Options::default(),
            a => Options::ablations()[a - 1].1,
        };
        let bytes = encode(&views(&streams), &Detector::default(), &opts);
        prop_assert_eq!(decode(&bytes).unwrap(), streams.clone());
        check_queries(&streams, &bytes);
    }
}

/// Long streams span several blocks; every block-crossing query still agrees.
#[test]
fn long_streams_span_blocks() {
    let n = MAX_BLOCK_REQUESTS as u64 * 2 + 1234;
    let noisy: Vec<u64> = (0..n)
        .map(|i| (i * 2_654_435_761) % 1_000_003 * 512)
        .collect();
    let streams: Streams = vec![
        ((0..n).map(|i| i * 4096).collect(), vec![4096; n as usize]),
        (noisy.clone(), noisy.iter().map(|x| x % 4000 + 1).collect()),
        (vec![7], vec![1]),
        ((0..n).map(|i| i * 4096).collect(), vec![4096; n as usize]),
    ];
    let bytes = encode(&views(&streams), &Detector::default(), &Options::default());
    let set = StreamSet::open(&bytes).unwrap();
    assert!(set.blocks().len() >= 4, "{} blocks", set.blocks().len());
    assert_eq!(set.decode_all().unwrap(), streams);
    let last = set.request(1, n - 1).unwrap();
    assert_eq!(
        last.requests,
        vec![(streams[1].0[n as usize - 1], streams[1].1[n as usize - 1])]
    );
    assert_eq!(last.blocks_decoded, 1);
    // A contiguous stream: an offset is in one block's range.
    let x = 4096 * (n - 10) + 5;
    let a = set.touching(0, x).unwrap();
    assert_eq!(a.requests, vec![(4096 * (n - 10), 4096)]);
    assert_eq!(a.blocks_decoded, 1);
    check_queries(&streams, &bytes);
}

fn damaged_set() -> (Streams, Vec<u8>) {
    let streams: Streams = vec![
        (
            (0..200u64)
                .map(|i| (i % 17) * 4096 + (i / 17) * 1_000_000)
                .collect(),
            (0..200u64).map(|i| 4096 + (i * 7919) % 100).collect(),
        ),
        ((0..50u64).map(|i| i * i * 7).collect(), vec![9; 50]),
        ((0..50u64).map(|i| i * i * 7).collect(), vec![9; 50]),
    ];
    let bytes = encode(&views(&streams), &Detector::default(), &Options::default());
    (streams, bytes)
}

#[test]
fn every_prefix_is_an_error() {
    let (_, bytes) = damaged_set();
    for cut in 0..bytes.len() {
        assert!(decode(&bytes[..cut]).is_err(), "prefix of {cut} bytes");
    }
}

/// Every byte flipped: the checksums catch it, whatever the codec.
#[test]
fn every_flipped_byte_is_an_error() {
    let (_, bytes) = damaged_set();
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let e = decode(&bad).expect_err("damage detected");
            assert!(e.to_string().contains("byte"), "{e}");
        }
    }
}

/// Without the checksums' help (header and blocks re-checksummed after damage), a
/// decoder still returns errors or streams, never panics or allocates without bound.
#[test]
fn damage_behind_valid_checksums_never_panics() {
    let (_, bytes) = damaged_set();
    let set = StreamSet::open(&bytes).unwrap();
    let blocks: Vec<(usize, usize, u8, usize)> = set
        .blocks()
        .iter()
        .map(|b| (b.at, b.len, b.codec, b.raw_len))
        .collect();
    for (at, len, codec, raw_len) in blocks {
        let raw = patio_core::entropy::unpack(codec, &bytes[at..at + len], raw_len, 0).unwrap();
        for i in 0..raw.len() {
            for flip in [0x01u8, 0x40, 0xff] {
                let mut bad = raw.clone();
                bad[i] ^= flip;
                let _ = patio_core::streamset::decode_streams_within(&bad[1..], 3, 300, 0);
            }
        }
    }
}

#[test]
fn wrong_magic_and_version_are_named() {
    let (_, mut bytes) = damaged_set();
    bytes[4] = 9;
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(e.contains("version 9"), "{e}");
    let e = decode(b"PTRCxxxx").unwrap_err().to_string();
    assert!(e.contains("magic"), "{e}");
    assert!(decode(b"").is_err());
}
