//! Decoders of untrusted bytes never panic and never allocate beyond a bound: the
//! native trace (`.ptrace`), the raw capture (`.praw`), the saved pattern model, the
//! stream-set encoding and its entropy-coded sections, and CSV traces. Each gets
//! arbitrary bytes, every prefix of a valid encoding and single-byte changes of one;
//! the decoder must return (an `Err` for a truncated encoding, where the format can
//! tell) and the largest single allocation it asks for must stay within
//! [`alloc_probe::bound`] of the input's size.

#[path = "common/alloc_probe.rs"]
mod alloc_probe;
mod common;

use alloc_probe::{bounded, damaged, flips};
use patio_core::blockset::{self, Options, StreamSet};
use patio_core::capture::Capture;
use patio_core::codec::{put_frame, Cursor};
use patio_core::entropy::{self, Effort};
use patio_core::online::{OnlineConfig, Predictor};
use patio_core::trace::{Op, Stream, StreamKey, Trace};
use patio_core::{ptrace, Detector};
use proptest::prelude::*;

fn key(k: usize) -> StreamKey {
    StreamKey {
        module: if k.is_multiple_of(2) {
            "POSIX"
        } else {
            "MPIIO"
        }
        .into(),
        file: format!("/data/f{}", k % 3),
        rank: k as i64,
        op: if k.is_multiple_of(3) {
            Op::Write
        } else {
            Op::Read
        },
    }
}

/// Small traces: strided streams with noise and arbitrary values, increasing times.
fn trace() -> impl Strategy<Value = Trace> {
    let stream = (
        0u64..1 << 40,
        1u64..1 << 20,
        1usize..80,
        1u64..1 << 16,
        prop::collection::vec(any::<u64>(), 0..6),
    );
    prop::collection::vec(stream, 1..5).prop_map(|streams| {
        let streams = streams
            .into_iter()
            .enumerate()
            .map(|(k, (base, stride, n, len, noise))| {
                let mut s = Stream::new(key(k));
                for i in 0..n as u64 {
                    s.offsets.push(base.wrapping_add(i.wrapping_mul(stride)));
                    s.lengths.push(len);
                }
                for v in noise {
                    s.offsets.push(v);
                    s.lengths.push(v >> 40);
                }
                let n = s.offsets.len();
                s.starts = (0..n).map(|i| i as f64 * 0.25).collect();
                s.ends = (0..n).map(|i| i as f64 * 0.25 + 0.125).collect();
                s
            })
            .collect();
        Trace::from_streams(streams)
    })
}

fn junk() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..400)
}

proptest! {
    #![proptest_config(common::config(48))]

    #[test]
    fn native_traces(t in trace(), flips in flips(24), junk in junk()) {
        let valid = ptrace::encode(&t, &Detector::default()).unwrap();
        damaged(&valid, &flips, false, ptrace::decode);
        bounded(&junk, ptrace::decode);
        let mut headed = b"PTRC".to_vec();
        headed.extend_from_slice(&junk);
        bounded(&headed, ptrace::decode);
    }

    #[test]
    fn stream_sets(t in trace(), flips in flips(24), junk in junk()) {
        let columns: Vec<(&[u64], &[u64])> = t
            .streams
            .iter()
            .map(|s| (s.offsets.as_slice(), s.lengths.as_slice()))
            .collect();
        let valid = blockset::encode(&columns, &Detector::default(), &Options::default());
        let open_all = |b: &[u8]| StreamSet::open(b).and_then(|s| s.decode_all());
        damaged(&valid, &flips, true, open_all);
        bounded(&junk, open_all);
    }

    #[test]
    fn entropy_sections(raw in prop::collection::vec(0u8..4, 0..3000), flips in flips(24), junk in junk()) {
        let mut valid = Vec::new();
        entropy::put_section(&raw, Effort::Best, &mut valid);
        let get = |b: &[u8]| entropy::get_section(&mut Cursor::new(b), "section");
        damaged(&valid, &flips, true, get);
        bounded(&junk, get);
    }

    #[test]
    fn pattern_models(offsets in prop::collection::vec(0u64..1 << 30, 4..60), flips in flips(24), junk in junk()) {
        let mut p = Predictor::new(OnlineConfig::default());
        for (i, &o) in offsets.iter().enumerate() {
            // A strided run, then the arbitrary offsets: bodies to remember.
            p.observe((i as u64) * 4096, 512);
            p.observe(o, 512);
        }
        let valid = p.save();
        let load = |b: &[u8]| Predictor::load(OnlineConfig::default(), b);
        damaged(&valid, &flips, true, load);
        bounded(&junk, load);
    }

    #[test]
    fn csv_traces(t in trace(), flips in flips(24), junk in junk()) {
        let mut valid = Vec::new();
        t.write_csv(&mut valid).unwrap();
        let parse = |b: &[u8]| Trace::parse_csv(b, "t.csv");
        damaged(&valid, &flips, false, parse);
        bounded(&junk, parse);
    }

    /// Raw captures: the header, a process frame of arbitrary numbers (records of 44
    /// bytes or more), then frames whose payloads start with a frame kind and go on
    /// with arbitrary bytes (the frame checksums pass, so the frame decoders see them).
    #[test]
    fn raw_captures(process in prop::collection::vec(any::<u8>(), 20), record in 44u16..60, frames in prop::collection::vec((0u8..4, prop::collection::vec(any::<u8>(), 0..120)), 0..6), junk in junk()) {
        let mut bytes = b"PRAW\x01\x00\x00\x00".to_vec();
        let mut head = vec![1u8, 0];
        head.extend_from_slice(&record.to_le_bytes());
        head.extend_from_slice(&process);
        head.extend_from_slice(&[0; 4]);
        put_frame(&mut bytes, &head);
        for (kind, body) in frames {
            let mut payload = vec![kind];
            payload.extend_from_slice(&body);
            put_frame(&mut bytes, &payload);
        }
        for cut in 0..=bytes.len() {
            bounded(&bytes[..cut], Capture::decode);
        }
        bounded(&junk, Capture::decode);
    }
}

#[test]
fn the_probe_sees_large_allocations() {
    let (v, largest) = alloc_probe::largest_allocation(|| Vec::<u8>::with_capacity(3 << 20));
    assert!(v.capacity() >= 3 << 20 && largest >= 3 << 20);
}

/// A section announcing the most its block count allows (blocks of 64 KiB each)
/// while holding only empty blocks: the decoder must not reserve the announced size.
#[test]
fn an_entropy_section_cannot_reserve_what_it_announces() {
    let blocks = 2000u64;
    let mut bytes = Vec::new();
    patio_core::codec::put_uvarint(&mut bytes, blocks * entropy::MAX_BLOCK as u64);
    patio_core::codec::put_uvarint(&mut bytes, blocks);
    bytes.resize(bytes.len() + 7 * blocks as usize, 0);
    let ok = bounded(&bytes, |b| {
        entropy::get_section(&mut Cursor::new(b), "section")
    });
    assert!(!ok, "empty blocks cannot make up the announced size");
}
