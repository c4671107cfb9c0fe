//! Property tests of the trace formats against their reference: the normalised
//! `Trace` that was written (`Trace::from_streams` of generated streams).
//!
//! * CSV `write_csv` → `parse_csv` is exact: same keys, offsets, lengths and the same
//!   `f64` bits for times — for file names with commas, quotes, newlines and unicode,
//!   negative ranks, offsets up to `u64::MAX - length`, any finite time.
//! * Native `encode_native` → `decode_native` (every detector window 1..=40) is exact
//!   for keys, offsets and lengths, and within ±1 ns for times (the format keeps whole
//!   nanoseconds; times are generated within ±10^5 s, where an `f64` resolves well
//!   below a nanosecond), with no damage reported.
//! * Truncating a native trace at every byte position never panics; a cut inside the
//!   8-byte header is `Err`; any other cut is `Ok` with exactly the streams whose frames
//!   lie wholly before the cut (each equal to the original stream with that key), and
//!   `damage` is `Some` unless the cut falls on a frame boundary.
//! * A frame whose payload is edited and re-sealed (valid CRC, wrong content) never
//!   makes decoding panic, and the streams of the frames before it survive.
//! * Module names with surrounding whitespace round trip through CSV like file names do.

mod common;

use common::*;
use patio_core::trace::{Op, Stream, StreamKey, Trace};
use patio_core::Detector;
use proptest::prelude::*;
use proptest::sample::Index;

fn file_name() -> BoxedStrategy<String> {
    prop_oneof![
        2 => "[a-z/._-]{0,12}",
        2 => "[a-z,\"' \\n\\r\\t/é日本🎉;|\\\\]{0,16}",
        1 => "\\PC{0,10}",
        1 => Just(String::new()),
        1 => Just("\"".to_string()),
        1 => Just("a,\"b\",c".to_string()),
    ]
    .boxed()
}

fn module_name() -> BoxedStrategy<String> {
    prop_oneof![
        Just("POSIX".to_string()),
        Just("MPIIO".to_string()),
        Just("STDIO".to_string()),
        "[A-Za-z0-9_]{1,8}"
    ]
    .boxed()
}

fn key(module: BoxedStrategy<String>) -> impl Strategy<Value = StreamKey> {
    (module, file_name(), special_i64(), any::<bool>()).prop_map(|(module, file, rank, w)| {
        StreamKey {
            module,
            file,
            rank,
            op: if w { Op::Write } else { Op::Read },
        }
    })
}

/// `(offset, length)` with `offset + length <= u64::MAX`.
fn request() -> BoxedStrategy<(u64, u64)> {
    prop_oneof![
        3 => (0u64..1 << 40, 0u64..1 << 20),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(o, l)| (if l == 0 { o } else { o % (u64::MAX - l + 1) }, l)),
        1 => (0u64..4096).prop_map(|l| (u64::MAX - l, l)),
    ]
    .boxed()
}

/// Offsets and lengths: arbitrary, or strided like real applications.
fn requests() -> BoxedStrategy<Vec<(u64, u64)>> {
    prop_oneof![
        prop::collection::vec(request(), 1..30),
        (0u64..1 << 40, 1u64..1 << 16, 0u64..1 << 16, 1usize..60)
            .prop_map(|(o, len, gap, n)| (0..n as u64)
                .map(|i| (o + i * (len + gap), len))
                .collect()),
    ]
    .boxed()
}

fn any_time() -> BoxedStrategy<f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |t| t.is_finite()),
        -1e5f64..1e5,
        Just(0.0),
        Just(-0.0),
    ]
    .boxed()
}

fn sane_time() -> BoxedStrategy<f64> {
    prop_oneof![
        3 => -1e5f64..1e5,
        1 => (-100_000_000_000_000i64..100_000_000_000_000).prop_map(|ns| ns as f64 / 1e9),
        1 => 0f64..1e-6,
        1 => Just(-0.0),
    ]
    .boxed()
}

fn trace_with(
    module: BoxedStrategy<String>,
    time: BoxedStrategy<f64>,
    streams: std::ops::Range<usize>,
) -> BoxedStrategy<Trace> {
    let stream = (
        key(module),
        requests(),
        prop::collection::vec((time.clone(), time), 60),
    )
        .prop_map(|(k, reqs, times)| {
            let mut s = Stream::new(k);
            for (i, (o, l)) in reqs.into_iter().enumerate() {
                let (a, b) = times[i % times.len()];
                s.push(o, l, a, b);
            }
            s
        });
    prop::collection::vec(stream, streams)
        .prop_map(Trace::from_streams)
        .boxed()
}

fn trace() -> BoxedStrategy<Trace> {
    trace_with(module_name(), any_time(), 0..5)
}

fn native_trace() -> BoxedStrategy<Trace> {
    trace_with(module_name(), sane_time(), 0..5)
}

fn same_exact(a: &Trace, b: &Trace) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.streams.len(), b.streams.len());
    for (x, y) in a.streams.iter().zip(&b.streams) {
        prop_assert_eq!(&x.key, &y.key);
        prop_assert_eq!(&x.offsets, &y.offsets);
        prop_assert_eq!(&x.lengths, &y.lengths);
        let bits = |v: &[f64]| v.iter().map(|t| t.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&x.starts), bits(&y.starts), "starts of {}", x.key);
        prop_assert_eq!(bits(&x.ends), bits(&y.ends), "ends of {}", x.key);
    }
    Ok(())
}

fn same_stream_to_ns(x: &Stream, y: &Stream) -> Result<(), TestCaseError> {
    prop_assert_eq!(&x.key, &y.key);
    prop_assert_eq!(&x.offsets, &y.offsets);
    prop_assert_eq!(&x.lengths, &y.lengths);
    prop_assert_eq!(x.starts.len(), y.starts.len());
    prop_assert_eq!(x.ends.len(), y.ends.len());
    for (col, (u, v)) in [
        ("start", (&x.starts, &y.starts)),
        ("end", (&x.ends, &y.ends)),
    ] {
        for (i, (&t0, &t1)) in u.iter().zip(v.iter()).enumerate() {
            prop_assert!(
                (t0 - t1).abs() <= 1e-9,
                "{} {} of {}: wrote {:e}, read {:e} (off by {:e} s)",
                col,
                i,
                x.key,
                t0,
                t1,
                t1 - t0
            );
        }
    }
    Ok(())
}

/// Ends of the native format's frames: header, then `len u32 | crc u32 | payload`.
fn frame_bounds(bytes: &[u8]) -> Vec<usize> {
    let mut out = vec![8];
    let mut pos = 8;
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 8 + len;
        out.push(pos);
    }
    assert_eq!(pos, bytes.len());
    out
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn csv_round_trip_is_exact(t in trace()) {
        let mut buf = Vec::new();
        t.write_csv(&mut buf).unwrap();
        let back = Trace::parse_csv(&buf[..], "t.csv");
        prop_assert!(back.is_ok(), "{:?}\n{}", back, String::from_utf8_lossy(&buf));
        same_exact(&back.unwrap(), &t)?;
    }

    /// Module names are free text too (the CSV writer quotes whatever they hold).
    #[test]
    fn csv_round_trip_any_module_name(t in trace_with(file_name(), any_time(), 0..5)) {
        let mut buf = Vec::new();
        t.write_csv(&mut buf).unwrap();
        let back = Trace::parse_csv(&buf[..], "t.csv");
        prop_assert!(back.is_ok(), "{:?}\n{}", back, String::from_utf8_lossy(&buf));
        same_exact(&back.unwrap(), &t)?;
    }

    #[test]
    fn native_round_trip(t in native_trace(), w in window()) {
        let bytes = t.encode_native(&Detector::new(w)).unwrap();
        let back = Trace::decode_native(&bytes);
        prop_assert!(back.is_ok(), "{:?}", back.err());
        let back = back.unwrap();
        prop_assert!(back.damage.is_none(), "{:?}", back.damage);
        prop_assert_eq!(back.trace.streams.len(), t.streams.len());
        for (x, y) in t.streams.iter().zip(&back.trace.streams) {
            same_stream_to_ns(x, y)?;
        }
    }

    #[test]
    fn native_truncation_keeps_whole_streams(t in native_trace(), w in window()) {
        let bytes = t.encode_native(&Detector::new(w)).unwrap();
        let bounds = frame_bounds(&bytes);
        prop_assert_eq!(bounds.len(), t.streams.len() + 1);
        for cut in 0..=bytes.len() {
            let got = Trace::decode_native(&bytes[..cut]);
            if cut < 8 {
                prop_assert!(got.is_err(), "cut {} inside the header decoded", cut);
                continue;
            }
            prop_assert!(got.is_ok(), "cut {}: {:?}", cut, got.err());
            let got = got.unwrap();
            let whole = bounds.iter().filter(|&&b| b <= cut).count() - 1;
            prop_assert_eq!(got.trace.streams.len(), whole, "cut {}", cut);
            for (x, y) in t.streams.iter().zip(&got.trace.streams) {
                same_stream_to_ns(x, y)?;
            }
            let at_boundary = bounds.contains(&cut);
            prop_assert_eq!(got.damage.is_none(), at_boundary, "cut {} of {}: damage {:?}", cut, bytes.len(), got.damage);
        }
    }

    /// Damage the frame checksum cannot catch (a buggy writer, a crafted file): edit
    /// one frame's payload and re-seal it. Decoding never panics, the header is intact
    /// so the answer is `Ok`, and every stream whose frame lies before the edited one
    /// is still there.
    #[test]
    fn native_resealed_frame_damage_never_panics(
        t in trace_with(module_name(), sane_time(), 1..5), w in window(), which in any::<Index>(),
        edits in prop::collection::vec((any::<Index>(), prop_oneof![any::<u8>(), Just(0u8), Just(0x7fu8), Just(0xffu8)], 0u8..3), 1..5),
    ) {
        let bytes = t.encode_native(&Detector::new(w)).unwrap();
        let bounds = frame_bounds(&bytes);
        let f = which.index(bounds.len() - 1);
        let (start, end) = (bounds[f], bounds[f + 1]);
        let mut payload = bytes[start + 8..end].to_vec();
        for &(at, v, kind) in &edits {
            match kind {
                0 if !payload.is_empty() => { let i = at.index(payload.len()); payload[i] = v; }
                1 => { let i = at.index(payload.len() + 1); payload.insert(i, v); }
                _ if !payload.is_empty() => { let i = at.index(payload.len()); payload.remove(i); }
                _ => {}
            }
        }
        let mut damaged = bytes[..start].to_vec();
        patio_core::codec::put_frame(&mut damaged, &payload);
        damaged.extend_from_slice(&bytes[end..]);
        let got = Trace::decode_native(&damaged);
        prop_assert!(got.is_ok(), "{:?}", got.err());
        let got = got.unwrap();
        for s in &t.streams[..f] {
            prop_assert!(got.trace.streams.iter().any(|g| g.key == s.key), "stream {} before the damaged frame lost", s.key);
        }
    }
}
