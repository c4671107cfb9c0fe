//! The indexed native trace (`.ptrace` version 2), written whole by `patio convert`
//! and `patio trace merge`: the stream keys, the requests as a stream set
//! (`blockset.rs`, so `patio query` reaches one stream's requests by decoding one
//! block) and the request times. Version 1 (checksummed frames appended as a tracer
//! runs, `trace.rs`) stays the format of traces being recorded; readers take both.
//! Layout: docs/FORMATS.md, "Native trace".

use crate::blockset::{self, Options, StreamSet};
use crate::codec::{put_uvarint, Cursor};
use crate::detect::Detector;
use crate::entropy::{get_section, put_section, Effort};
use crate::error::{CoreError, Result};
use crate::seqcodec::{SeqDecoder, SeqEncoder};
use crate::trace::{get_key, put_key, to_ns, Stream, StreamKey, Trace, NATIVE_MAGIC};
use crate::tree::PatternSeq;

pub const INDEXED_VERSION: u16 = 2;

/// Encodes `trace` as an indexed native trace. Fails on a time that is not finite
/// or lies beyond ±2^63 ns of the time base.
pub fn encode(trace: &Trace, detector: &Detector) -> Result<Vec<u8>> {
    encode_observed(trace, detector, &mut |_, _| {})
}

/// [`encode`], calling `progress(done, total)` as the requests' offsets and lengths are
/// coded (see [`blockset::encode_observed`]), the bulk of the work.
pub fn encode_observed(
    trace: &Trace,
    detector: &Detector,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<u8>> {
    let mut keys = Vec::new();
    put_uvarint(&mut keys, trace.streams.len() as u64);
    for s in &trace.streams {
        put_key(&s.key, &mut keys);
    }
    let columns: Vec<(&[u64], &[u64])> = trace
        .streams
        .iter()
        .map(|s| (s.offsets.as_slice(), s.lengths.as_slice()))
        .collect();
    let set = blockset::encode_observed(&columns, detector, &Options::default(), progress);
    let mut times = Vec::new();
    let mut enc = SeqEncoder::byte_aligned();
    for s in &trace.streams {
        let ns = |t: &f64| {
            to_ns(*t).ok_or_else(|| {
                CoreError::Invalid(format!(
                    "stream {}: time {t} s cannot be stored in nanoseconds",
                    s.key
                ))
            })
        };
        let starts = s.starts.iter().map(ns).collect::<Result<Vec<i64>>>()?;
        let ends = s.ends.iter().map(ns).collect::<Result<Vec<i64>>>()?;
        let durations: Vec<i64> = ends
            .iter()
            .zip(&starts)
            .map(|(e, s)| e.wrapping_sub(*s))
            .collect();
        enc.encode(&PatternSeq::build(&starts, detector), &mut times);
        enc.encode(&PatternSeq::build(&durations, detector), &mut times);
    }
    let mut out = NATIVE_MAGIC.to_vec();
    out.extend_from_slice(&INDEXED_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    put_section(&keys, Effort::Best, &mut out);
    put_uvarint(&mut out, set.len() as u64);
    out.extend_from_slice(&set);
    put_section(&times, Effort::Best, &mut out);
    Ok(out)
}

/// An indexed trace opened for queries: keys read, requests behind their index,
/// times not decoded.
pub struct Indexed<'a> {
    pub keys: Vec<StreamKey>,
    pub set: StreamSet<'a>,
    times_at: usize,
    bytes: &'a [u8],
}

fn read_keys(raw: &[u8], at: usize) -> Result<Vec<StreamKey>> {
    let mut c = Cursor::with_base(raw, at);
    let n = c.count(c.remaining() / 4, "stream")?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        keys.push(get_key(&mut c)?);
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the stream keys"));
    }
    Ok(keys)
}

impl<'a> Indexed<'a> {
    /// Opens an indexed trace (the whole file's bytes).
    pub fn open(bytes: &'a [u8]) -> Result<Self> {
        let mut c = Cursor::new(bytes);
        if c.take(4).ok() != Some(&NATIVE_MAGIC[..]) {
            return Err(CoreError::corrupt(0, "not a patio trace (bad magic)"));
        }
        let version = c.u16_le()?;
        if version != INDEXED_VERSION {
            return Err(CoreError::corrupt(
                4,
                format!(
                    "trace version {version} has no block index (version {INDEXED_VERSION} has)"
                ),
            ));
        }
        if c.u16_le()? != 0 {
            return Err(CoreError::corrupt(6, "reserved header field is not 0"));
        }
        let at = c.position();
        let keys = read_keys(&get_section(&mut c, "stream keys")?, at)?;
        let len = c.count(c.remaining(), "stream set byte")?;
        let set_at = c.position();
        let set = StreamSet::open(c.take(len)?).map_err(|e| shift(e, set_at))?;
        if set.streams() != keys.len() {
            return Err(CoreError::corrupt(
                set_at,
                format!(
                    "{} stream keys, {} streams of requests",
                    keys.len(),
                    set.streams()
                ),
            ));
        }
        Ok(Indexed {
            keys,
            set,
            times_at: c.position(),
            bytes,
        })
    }

    /// The whole trace, times included.
    pub fn decode(&self) -> Result<Trace> {
        let requests = self.set.decode_all()?;
        let mut c = Cursor::with_base(&self.bytes[self.times_at..], self.times_at);
        let times = get_section(&mut c, "request times")?;
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the trace"));
        }
        let mut t = Cursor::with_base(&times, self.times_at);
        let mut dec = SeqDecoder::new();
        let mut streams = Vec::with_capacity(self.keys.len());
        for (key, (offsets, lengths)) in self.keys.iter().zip(requests) {
            let mut column = || -> Result<Vec<i64>> {
                let at = t.position();
                let seq = dec.decode(&mut t)?;
                if seq.len() != offsets.len() as u64 {
                    return Err(CoreError::corrupt(
                        at,
                        format!("stream {key}: times and requests differ in number"),
                    ));
                }
                Ok(seq.expand())
            };
            let starts = column()?;
            let durations = column()?;
            streams.push(Stream {
                key: key.clone(),
                starts: starts.iter().map(|&s| s as f64 / 1e9).collect(),
                ends: starts
                    .iter()
                    .zip(&durations)
                    .map(|(&s, &d)| s.wrapping_add(d) as f64 / 1e9)
                    .collect(),
                offsets,
                lengths,
            });
        }
        if !t.is_at_end() {
            return Err(t.error("trailing bytes after the request times"));
        }
        Ok(Trace::from_streams(streams))
    }
}

/// An error of the embedded stream set, with its offset made absolute.
fn shift(e: CoreError, base: usize) -> CoreError {
    match e {
        CoreError::Corrupt { offset, reason } => CoreError::Corrupt {
            offset: offset + base as u64,
            reason,
        },
        other => other,
    }
}

/// Decodes an indexed native trace.
pub fn decode(bytes: &[u8]) -> Result<Trace> {
    Indexed::open(bytes)?.decode()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Op;

    #[test]
    fn indexed_trace_round_trips_and_refuses_damage() {
        let key = |rank| StreamKey {
            module: "POSIX".into(),
            file: "/data/out.h5".into(),
            rank,
            op: Op::Write,
        };
        let records = (0..4i64).flat_map(|r| {
            (0..50u64).map(move |i| {
                let t = i as f64 * 1e-3 + r as f64;
                (key(r), i * 4096 * 4 + r as u64 * 4096, 4096, t, t + 2e-6)
            })
        });
        let trace = Trace::from_records(records);
        let bytes = encode(&trace, &Detector::default()).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.streams.len(), 4);
        for (a, b) in trace.streams.iter().zip(&back.streams) {
            assert_eq!(
                (&a.key, &a.offsets, &a.lengths),
                (&b.key, &b.offsets, &b.lengths)
            );
            for (x, y) in a.starts.iter().zip(&b.starts) {
                assert!((x - y).abs() < 1e-9);
            }
        }
        let opened = Indexed::open(&bytes).unwrap();
        assert_eq!(
            opened.set.request(2, 7).unwrap().requests,
            vec![(7 * 16384 + 8192, 4096)]
        );
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err());
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x21;
            assert!(decode(&bad).is_err(), "flip at {at}");
        }
    }
}
