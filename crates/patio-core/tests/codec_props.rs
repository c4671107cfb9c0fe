//! Property tests of the byte codecs against their reference: the value that was
//! encoded. `seqcodec::encode_seq`/`decode_seq` must give back the same `PatternSeq`
//! (and hence the same expansion), a `SeqEncoder` that shares bodies across several
//! sequences must decode in order with one `SeqDecoder`, and the decoders must never
//! panic on arbitrary bytes, on single-byte flips of valid encodings, or on
//! truncations — truncations must be `Err`. When damaged bytes do decode, the result
//! must still answer `len`/`get` without panicking. Also: varints, zigzag, blobs and
//! frames round trip and reject truncation.

mod common;

use common::*;
use patio_core::codec::{self, Cursor};
use patio_core::seqcodec::{decode_seq, encode_seq, SeqDecoder, SeqEncoder};
use patio_core::{Detector, PatternSeq};
use proptest::prelude::*;
use proptest::sample::Index;

/// Exercise a decoded (possibly garbage) sequence without expanding it.
fn poke(seq: &PatternSeq) {
    let n = seq.len();
    let _ = seq.get(0);
    let _ = seq.get(n / 2);
    let _ = seq.get(n.saturating_sub(1));
    let _ = seq.get(n);
    let _ = seq.coverage();
    for p in seq.pieces() {
        let _ = (p.len(), p.first(), p.last());
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn seq_round_trip(xs in sequence(), w in window()) {
        let seq = PatternSeq::build(&xs, &Detector::new(w));
        let bytes = encode_seq(&seq);
        let back = decode_seq(&bytes);
        prop_assert!(back.is_ok(), "{:?}", back);
        let back = back.unwrap();
        prop_assert_eq!(&back, &seq);
        prop_assert_eq!(back.expand(), xs);
    }

    #[test]
    fn shared_encoder_decodes_in_order(seqs in prop::collection::vec(sequence(), 1..6), w in window()) {
        let d = Detector::new(w);
        let built: Vec<PatternSeq> = seqs.iter().map(|xs| PatternSeq::build(xs, &d)).collect();
        let mut enc = SeqEncoder::new();
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        for s in &built {
            enc.encode(s, &mut buf);
            ends.push(buf.len());
        }
        let mut dec = SeqDecoder::new();
        let mut c = Cursor::new(&buf);
        for (i, s) in built.iter().enumerate() {
            let got = dec.decode(&mut c);
            prop_assert!(got.is_ok(), "sequence {}: {:?}", i, got);
            let got = got.unwrap();
            prop_assert_eq!(&got, s);
            prop_assert_eq!(got.expand(), seqs[i].clone());
            prop_assert_eq!(c.position(), ends[i]);
        }
        prop_assert!(c.is_at_end());
        // Truncating the shared buffer anywhere makes the sequence it cuts fail.
        for cut in 0..buf.len() {
            let mut dec = SeqDecoder::new();
            let mut c = Cursor::new(&buf[..cut]);
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            for i in 0..whole {
                let got = dec.decode(&mut c);
                prop_assert!(got.is_ok(), "cut {}: sequence {} lies before the cut: {:?}", cut, i, got);
            }
            if whole < built.len() {
                prop_assert!(dec.decode(&mut c).is_err(), "cut {} inside sequence {} decoded", cut, whole);
            }
        }
    }

    #[test]
    fn seq_truncations_are_errors(xs in sequence(), w in window()) {
        let bytes = encode_seq(&PatternSeq::build(&xs, &Detector::new(w)));
        for cut in 0..bytes.len() {
            let got = decode_seq(&bytes[..cut]);
            prop_assert!(got.is_err(), "prefix of {} of {} bytes decoded: {:?}", cut, bytes.len(), got);
        }
    }

    #[test]
    fn seq_byte_flips_never_panic(xs in sequence(), w in window(), flips in prop::collection::vec((any::<Index>(), 1u8..=255), 1..16)) {
        let bytes = encode_seq(&PatternSeq::build(&xs, &Detector::new(w)));
        prop_assume!(!bytes.is_empty());
        for (at, x) in flips {
            let mut b = bytes.clone();
            let i = at.index(b.len());
            b[i] ^= x;
            if let Ok(seq) = decode_seq(&b) {
                poke(&seq);
            }
        }
    }

    #[test]
    fn seq_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(seq) = decode_seq(&bytes) {
            poke(&seq);
        }
        let mut dec = SeqDecoder::new();
        let mut c = Cursor::new(&bytes);
        while let Ok(seq) = dec.decode(&mut c) {
            poke(&seq);
            if c.is_at_end() { break; }
        }
    }

    /// Arbitrary bytes shaped like the format: small varints, so that tags, counts
    /// and nesting are plausible and the decoder gets deep before failing.
    #[test]
    fn seq_plausible_bytes_never_panic(words in prop::collection::vec(prop_oneof![6 => 0u64..3, 2 => 0u64..130, 1 => any::<u64>(), 1 => Just(u64::MAX)], 0..60)) {
        let mut bytes = Vec::new();
        for w in words { codec::put_uvarint(&mut bytes, w); }
        if let Ok(seq) = decode_seq(&bytes) {
            poke(&seq);
        }
        let mut dec = SeqDecoder::new();
        let mut c = Cursor::new(&bytes);
        while let Ok(seq) = dec.decode(&mut c) {
            poke(&seq);
            if c.is_at_end() { break; }
        }
    }

    #[test]
    fn varints_round_trip(v in special_i64(), u in any::<u64>()) {
        let mut b = Vec::new();
        codec::put_ivarint(&mut b, v);
        codec::put_uvarint(&mut b, u);
        prop_assert_eq!(codec::unzigzag(codec::zigzag(v)), v);
        let mut c = Cursor::new(&b);
        prop_assert_eq!(c.ivarint().unwrap(), v);
        prop_assert_eq!(c.uvarint().unwrap(), u);
        prop_assert!(c.is_at_end());
        // Every strict prefix of a varint is an error.
        let mut one = Vec::new();
        codec::put_uvarint(&mut one, u);
        for cut in 0..one.len() {
            prop_assert!(Cursor::new(&one[..cut]).uvarint().is_err());
        }
    }

    #[test]
    fn blobs_and_frames(payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6), flip in any::<Index>(), x in 1u8..=255) {
        let blob = codec::write_blob(b"TEST", 1, &payloads.concat());
        let (v, p) = codec::read_blob(b"TEST", 1, &blob).unwrap();
        prop_assert_eq!(v, 1);
        prop_assert_eq!(p, &payloads.concat()[..]);
        for cut in 0..blob.len() {
            prop_assert!(codec::read_blob(b"TEST", 1, &blob[..cut]).is_err(), "blob prefix {} read", cut);
        }
        let mut bad = blob.clone();
        let i = flip.index(bad.len());
        bad[i] ^= x;
        // Any flip — magic, version, reserved bytes, length, checksum or payload — is refused.
        prop_assert!(codec::read_blob(b"TEST", 1, &bad).is_err(), "flip at {} accepted", i);
        let mut log = Vec::new();
        let mut bounds = vec![0];
        for p in &payloads {
            codec::put_frame(&mut log, p);
            bounds.push(log.len());
        }
        for cut in 0..=log.len() {
            let (frames, err) = codec::read_frames(&log[..cut], 100);
            let whole = bounds.iter().filter(|&&b| b <= cut).count() - 1;
            prop_assert_eq!(frames.len(), whole);
            for (k, (at, f)) in frames.iter().enumerate() {
                prop_assert_eq!(*f, &payloads[k][..]);
                prop_assert_eq!(*at, 100 + bounds[k] + 8);
            }
            prop_assert_eq!(err.is_none(), bounds.contains(&cut), "cut {}", cut);
        }
    }
}
