//! The stream-set format against its reference model (the streams themselves):
//! `decode(encode(streams)) == streams` for arbitrary stream sets and every option,
//! block-level queries equal to the same queries on the streams, and damaged or
//! truncated encodings refused with an error, never a panic; the same for the block
//! coder's sections (container index records, pattern map, native trace).

use patio_core::blockset::{decode, encode, Options, StreamSet, MAX_BLOCK_REQUESTS};
use patio_core::codec::Cursor;
use patio_core::entropy::{get_section, put_section, Effort};
use patio_core::Detector;
use proptest::prelude::*;

mod common;

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
        let streams = common::with_copies(&unique, &copies);
        let opts = common::set_options(ablation);
        let bytes = encode(&views(&streams), &Detector::default(), &opts);
        prop_assert_eq!(decode(&bytes).unwrap(), streams.clone());
        let flat = StreamSet::open(&bytes).unwrap().decode_flat().unwrap();
        prop_assert_eq!(flat.streams(), streams.len());
        for (k, (o, l)) in streams.iter().enumerate() {
            prop_assert_eq!(flat.stream(k), (o.as_slice(), l.as_slice()));
        }
        check_queries(&streams, &bytes);
    }

    /// Any stream set, damaged anywhere: every prefix and a flip of every byte (by a
    /// random mask) is an error naming a byte offset, never a panic.
    #[test]
    fn arbitrary_sets_refuse_every_prefix_and_flip(
        streams in proptest::collection::vec(stream_strategy(), 1..6),
        masks in proptest::collection::vec(1u8..=255, 64),
    ) {
        let bytes = encode(&views(&streams), &Detector::default(), &Options::default());
        for cut in 0..bytes.len() {
            prop_assert!(decode(&bytes[..cut]).is_err(), "prefix of {} bytes", cut);
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= masks[at % masks.len()];
            match decode(&bad) {
                Err(e) => prop_assert!(e.to_string().contains("byte"), "{}", e),
                Ok(_) => prop_assert!(false, "flip at byte {} went unnoticed", at),
            }
        }
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

/// Every byte flipped (and every prefix): the checksums catch it, whatever the codec.
#[test]
fn every_flipped_byte_is_an_error() {
    let (_, bytes) = damaged_set();
    common::set_refuses_damage(&bytes);
}

/// Without the checksums' help (blocks changed after their checksums were checked), a
/// decoder still returns errors or streams, never panics or allocates without bound.
#[test]
fn damage_behind_valid_checksums_never_panics() {
    let (streams, bytes) = damaged_set();
    let set = StreamSet::open(&bytes).unwrap();
    for b in 0..set.blocks().len() {
        let raw = set.raw_block(b).unwrap().into_owned();
        for i in 0..raw.len() {
            for flip in [0x01u8, 0x40, 0xff] {
                let mut bad = raw.clone();
                bad[i] ^= flip;
                let n = streams.len() as u64;
                let _ = patio_core::streamset::decode_streams_within(&bad[1..], n, 300, 0);
            }
        }
    }
}

#[test]
fn unknown_versions_and_flags_are_named() {
    let (_, mut bytes) = damaged_set();
    bytes[0] = (bytes[0] & !7) | 5;
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(e.contains("version 5"), "{e}");
    bytes[0] = 2 | 0x80;
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(e.contains("flags"), "{e}");
    let e = decode(b"PSET\x07xxxxx").unwrap_err().to_string();
    assert!(e.contains("version 7"), "{e}");
    assert!(decode(b"").is_err());
}

/// Bytes a block coder meets: varint records with repeats, or noise.
fn section_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (1u32..400, 0usize..4000).prop_map(|(period, n)| {
            (0..n as u32)
                .flat_map(|i| [(i % period) as u8, 0x81, (i / period) as u8])
                .collect()
        }),
        proptest::collection::vec(any::<u8>(), 0..300),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A section decodes to its bytes; every prefix and every flipped byte is an error
    /// naming a byte offset.
    #[test]
    fn sections_round_trip_and_refuse_damage(
        raw in section_bytes(),
        stored in any::<bool>(),
        masks in proptest::collection::vec(1u8..=255, 64),
    ) {
        let effort = if stored { Effort::Stored } else { Effort::Best };
        let mut bytes = Vec::new();
        put_section(&raw, effort, &mut bytes);
        let mut c = Cursor::new(&bytes);
        prop_assert_eq!(get_section(&mut c, "test").unwrap(), raw.clone());
        prop_assert!(c.is_at_end());
        for cut in 0..bytes.len() {
            prop_assert!(get_section(&mut Cursor::new(&bytes[..cut]), "test").is_err());
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= masks[at % masks.len()];
            let mut c = Cursor::new(&bad);
            match get_section(&mut c, "test") {
                Err(e) => prop_assert!(e.to_string().contains("byte"), "{}", e),
                // Only a section that stops short (its enclosing reader then meets
                // bytes it does not expect) may read without an error.
                Ok(_) => prop_assert!(!c.is_at_end(), "flip at byte {} unnoticed", at),
            }
        }
    }
}

/// A section longer than one block: several blocks, each decoded alone.
#[test]
fn long_sections_span_blocks() {
    let raw: Vec<u8> = (0..150_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut bytes = Vec::new();
    put_section(&raw, Effort::Best, &mut bytes);
    assert!(bytes.len() < raw.len() / 10, "{} bytes", bytes.len());
    assert_eq!(get_section(&mut Cursor::new(&bytes), "test").unwrap(), raw);
    for cut in (0..bytes.len()).step_by(7) {
        assert!(get_section(&mut Cursor::new(&bytes[..cut]), "test").is_err());
    }
}
