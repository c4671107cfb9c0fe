//! The trace model every layer speaks, and its two file formats.
//!
//! A record is `(stream, offset, length, start, end)`; a stream is
//! `(module, file, rank, op)` — the I/O layer that saw the request (POSIX, MPIIO,
//! STDIO, FUSE, …), the file, the rank or process, and read/write. Records inside a
//! stream are kept in start-time order.
//!
//! * CSV, header `module,file,rank,op,offset,length,start,end` (times in seconds).
//! * Native (`.ptrace`) version 2, written whole: see `ptrace.rs` (read here too).
//! * Native (`.ptrace`) version 1: a 8-byte file header then checksummed frames, each adding
//!   records to a stream; offsets, lengths, start times and durations are pattern
//!   sequences sharing one body dictionary across the file. Times are kept at
//!   nanosecond resolution. A torn or corrupt frame ends reading: every frame before
//!   it is kept and the loss is reported.
//!
//! Both are specified in docs/FORMATS.md.

use crate::codec::{put_frame, put_uvarint, read_frames, Cursor};
use crate::detect::Detector;
use crate::error::{CoreError, Result};
use crate::seqcodec::{SeqDecoder, SeqEncoder};
use crate::tree::PatternSeq;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// CSV header line, exactly.
pub const CSV_HEADER: &str = "module,file,rank,op,offset,length,start,end";
/// Magic and version of the native format.
pub const NATIVE_MAGIC: &[u8; 4] = b"PTRC";
pub const NATIVE_VERSION: u16 = 1;
/// Records in one frame at most: longer streams continue in further frames, and a
/// reader refuses frames that claim more (a few crafted bytes must not demand
/// terabytes of memory).
pub const MAX_FRAME_RECORDS: usize = 1 << 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<Op> {
        match s {
            "read" | "r" | "READ" => Some(Op::Read),
            "write" | "w" | "WRITE" => Some(Op::Write),
            _ => None,
        }
    }
}

/// Identity of a stream of requests.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    pub module: String,
    pub file: String,
    pub rank: i64,
    pub op: Op,
}

impl std::fmt::Display for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rank {} {} {}",
            self.module,
            self.rank,
            self.op.as_str(),
            self.file
        )
    }
}

/// The requests of one stream, as columns, in start-time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    pub key: StreamKey,
    pub offsets: Vec<u64>,
    pub lengths: Vec<u64>,
    pub starts: Vec<f64>,
    pub ends: Vec<f64>,
}

impl Stream {
    pub fn new(key: StreamKey) -> Self {
        Stream {
            key,
            offsets: Vec::new(),
            lengths: Vec::new(),
            starts: Vec::new(),
            ends: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn push(&mut self, offset: u64, length: u64, start: f64, end: f64) {
        self.offsets.push(offset);
        self.lengths.push(length);
        self.starts.push(start);
        self.ends.push(end);
    }

    /// Stable sort of the records by start time.
    fn sort_by_start(&mut self) {
        if self.starts.windows(2).all(|w| w[0] <= w[1]) {
            return;
        }
        let mut idx: Vec<usize> = (0..self.len()).collect();
        idx.sort_by(|&a, &b| self.starts[a].total_cmp(&self.starts[b]));
        let pick_u = |v: &[u64]| idx.iter().map(|&i| v[i]).collect::<Vec<_>>();
        let pick_f = |v: &[f64]| idx.iter().map(|&i| v[i]).collect::<Vec<_>>();
        (self.offsets, self.lengths) = (pick_u(&self.offsets), pick_u(&self.lengths));
        (self.starts, self.ends) = (pick_f(&self.starts), pick_f(&self.ends));
    }
}

/// A whole trace: streams in key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub streams: Vec<Stream>,
}

/// A trace read from a damaged file: what was intact, and what was lost.
#[derive(Debug)]
pub struct Recovered {
    pub trace: Trace,
    /// Set when part of the input was dropped: where, why and how much.
    pub damage: Option<String>,
}

impl Trace {
    /// Groups loose records into streams (sorted by key, records by start time).
    pub fn from_records(
        records: impl IntoIterator<Item = (StreamKey, u64, u64, f64, f64)>,
    ) -> Self {
        let mut by_key: HashMap<StreamKey, Stream> = HashMap::new();
        for (key, offset, length, start, end) in records {
            by_key
                .entry(key.clone())
                .or_insert_with(|| Stream::new(key))
                .push(offset, length, start, end);
        }
        Self::from_streams(by_key.into_values().collect())
    }

    /// Normalises streams: merges equal keys, sorts keys and records.
    pub fn from_streams(streams: Vec<Stream>) -> Self {
        let mut merged: HashMap<StreamKey, Stream> = HashMap::new();
        for s in streams {
            match merged.get_mut(&s.key) {
                Some(m) => {
                    m.offsets.extend(s.offsets);
                    m.lengths.extend(s.lengths);
                    m.starts.extend(s.starts);
                    m.ends.extend(s.ends);
                }
                None => {
                    merged.insert(s.key.clone(), s);
                }
            }
        }
        let mut streams: Vec<Stream> = merged.into_values().filter(|s| !s.is_empty()).collect();
        streams.sort_by(|a, b| a.key.cmp(&b.key));
        streams.iter_mut().for_each(Stream::sort_by_start);
        Trace { streams }
    }

    pub fn requests(&self) -> usize {
        self.streams.iter().map(Stream::len).sum()
    }

    // ---- CSV -------------------------------------------------------------------

    pub fn read_csv(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| CoreError::io(path, e))?;
        Self::parse_csv(std::io::BufReader::new(file), &path.display().to_string())
    }

    /// Parses CSV text; `name` is used in error messages (`name:line: reason`).
    pub fn parse_csv(input: impl std::io::Read, name: &str) -> Result<Self> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(input);
        let parse_err = |line: u64, reason: String| CoreError::Parse {
            path: name.to_string(),
            line,
            reason,
        };
        let mut records = Vec::new();
        let mut row = csv::StringRecord::new();
        let mut first = true;
        loop {
            let line = reader.position().line();
            match reader.read_record(&mut row) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => return Err(parse_err(line, e.to_string())),
            }
            if first {
                first = false;
                let header: Vec<&str> = row.iter().map(str::trim).collect();
                if header.join(",") != CSV_HEADER {
                    return Err(parse_err(
                        line,
                        format!("expected the header `{CSV_HEADER}`"),
                    ));
                }
                continue;
            }
            if row.len() == 1 && row[0].trim().is_empty() {
                continue;
            }
            if row.len() != 8 {
                return Err(parse_err(
                    line,
                    format!("expected 8 fields, found {}", row.len()),
                ));
            }
            let field = |i: usize| row[i].trim();
            let int = |i: usize, what: &str| -> Result<u64> {
                field(i).parse::<u64>().map_err(|_| {
                    parse_err(
                        line,
                        format!("{what} `{}` is not an unsigned integer", field(i)),
                    )
                })
            };
            let float = |i: usize, what: &str| -> Result<f64> {
                field(i)
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        parse_err(
                            line,
                            format!("{what} `{}` is not a number of seconds", field(i)),
                        )
                    })
            };
            let rank = field(2)
                .parse::<i64>()
                .map_err(|_| parse_err(line, format!("rank `{}` is not an integer", field(2))))?;
            let op = Op::parse(field(3)).ok_or_else(|| {
                parse_err(line, format!("op `{}` is neither read nor write", field(3)))
            })?;
            let key = StreamKey {
                module: row[0].to_string(),
                file: row[1].to_string(),
                rank,
                op,
            };
            let (offset, length) = (int(4, "offset")?, int(5, "length")?);
            if offset.checked_add(length).is_none() {
                return Err(parse_err(line, "offset + length exceeds 2^64".into()));
            }
            records.push((key, offset, length, float(6, "start")?, float(7, "end")?));
        }
        Ok(Self::from_records(records))
    }

    pub fn write_csv(&self, out: impl Write) -> Result<()> {
        self.write_csv_observed(out, &mut |_| {})
    }

    /// [`Trace::write_csv`], calling `progress(rows)` with the requests written so far
    /// every 65,536 requests and at the end.
    pub fn write_csv_observed(&self, out: impl Write, progress: &mut dyn FnMut(u64)) -> Result<()> {
        let mut w = csv::Writer::from_writer(out);
        let err = |e: csv::Error| CoreError::Invalid(format!("writing CSV: {e}"));
        w.write_record(CSV_HEADER.split(',')).map_err(err)?;
        let mut rows = 0u64;
        for s in &self.streams {
            for i in 0..s.len() {
                w.write_record([
                    s.key.module.clone(),
                    s.key.file.clone(),
                    s.key.rank.to_string(),
                    s.key.op.as_str().to_string(),
                    s.offsets[i].to_string(),
                    s.lengths[i].to_string(),
                    format!("{:?}", s.starts[i]),
                    format!("{:?}", s.ends[i]),
                ])
                .map_err(err)?;
                rows += 1;
                if rows.is_multiple_of(1 << 16) {
                    progress(rows);
                }
            }
        }
        w.flush()
            .map_err(|e| CoreError::Invalid(format!("writing CSV: {e}")))?;
        progress(rows);
        Ok(())
    }

    // ---- native ----------------------------------------------------------------

    /// Encodes the trace in the native format: one frame per stream, or several of at
    /// most [`MAX_FRAME_RECORDS`] records for long streams. Fails on a time that is not
    /// finite or lies beyond ±2^63 ns (about ±292 years) of the time base.
    pub fn encode_native(&self, detector: &Detector) -> Result<Vec<u8>> {
        let mut out = native_header();
        let mut enc = SeqEncoder::new();
        for (id, s) in self.streams.iter().enumerate() {
            if let Some(t) = s
                .starts
                .iter()
                .chain(&s.ends)
                .find(|t| to_ns(**t).is_none())
            {
                return Err(CoreError::Invalid(format!(
                    "stream {}: time {t} s cannot be stored in nanoseconds",
                    s.key
                )));
            }
            for (part, from) in (0..s.len().max(1)).step_by(MAX_FRAME_RECORDS).enumerate() {
                let to = (from + MAX_FRAME_RECORDS).min(s.len());
                let chunk = Stream {
                    key: s.key.clone(),
                    offsets: s.offsets[from..to].to_vec(),
                    lengths: s.lengths[from..to].to_vec(),
                    starts: s.starts[from..to].to_vec(),
                    ends: s.ends[from..to].to_vec(),
                };
                let payload = encode_chunk(&mut enc, detector, &s.key, id, part == 0, &chunk);
                put_frame(&mut out, &payload);
            }
        }
        Ok(out)
    }

    /// Decodes a native trace, keeping every intact frame before any damage.
    pub fn decode_native(bytes: &[u8]) -> Result<Recovered> {
        let mut c = Cursor::new(bytes);
        let magic = c
            .take(4)
            .map_err(|_| CoreError::corrupt(0, "too short to be a patio trace"))?;
        if magic != NATIVE_MAGIC {
            return Err(CoreError::corrupt(0, "not a patio trace (bad magic)"));
        }
        let version = c.u16_le()?;
        if version == crate::ptrace::INDEXED_VERSION {
            return Ok(Recovered {
                trace: crate::ptrace::decode(bytes)?,
                damage: None,
            });
        }
        if version == 0 || version > NATIVE_VERSION {
            return Err(CoreError::corrupt(
                4,
                format!("unsupported trace version {version}"),
            ));
        }
        c.u16_le()?;
        let (frames, tail) = read_frames(&bytes[8..], 8);
        let mut keys: Vec<StreamKey> = Vec::new();
        let mut streams: Vec<Stream> = Vec::new();
        let mut dec = SeqDecoder::new();
        let mut damage = tail.map(|e| (e, bytes.len()));
        for (at, payload) in frames {
            if let Err(e) = decode_chunk(&mut dec, payload, at, &mut keys, &mut streams) {
                damage = Some((e, bytes.len()));
                break;
            }
        }
        let damage = damage.map(|(e, total)| {
            let from = match &e {
                CoreError::Corrupt { offset, .. } => *offset,
                _ => 0,
            };
            format!("{e}; dropped everything from byte {from} of {total}")
        });
        Ok(Recovered {
            trace: Trace::from_streams(streams),
            damage,
        })
    }

    pub fn read_native(path: &Path) -> Result<Recovered> {
        let bytes = std::fs::read(path).map_err(|e| CoreError::io(path, e))?;
        Self::decode_native(&bytes)
    }
}

/// The 8-byte header of a native trace file.
pub fn native_header() -> Vec<u8> {
    let mut out = NATIVE_MAGIC.to_vec();
    out.extend_from_slice(&NATIVE_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Seconds as whole nanoseconds (the native format's resolution); `None` when not
/// finite or beyond ±2^63 ns.
pub(crate) fn to_ns(seconds: f64) -> Option<i64> {
    let ns = (seconds * 1e9).round();
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

/// One frame's payload: records appended to stream `id`; `new_key` says whether the
/// key is introduced here. Used for whole streams and by writers that flush a stream
/// in several chunks.
pub fn encode_chunk(
    enc: &mut SeqEncoder,
    detector: &Detector,
    key: &StreamKey,
    id: usize,
    new_key: bool,
    s: &Stream,
) -> Vec<u8> {
    let mut buf = Vec::new();
    if new_key {
        put_uvarint(&mut buf, 0);
        put_key(key, &mut buf);
    } else {
        put_uvarint(&mut buf, id as u64 + 1);
    }
    let seq = |v: Vec<i64>| PatternSeq::build(&v, detector);
    enc.encode(
        &seq(s.offsets.iter().map(|&v| v as i64).collect()),
        &mut buf,
    );
    enc.encode(
        &seq(s.lengths.iter().map(|&v| v as i64).collect()),
        &mut buf,
    );
    let ns = |t: f64| to_ns(t).expect("times checked by encode_native");
    let starts: Vec<i64> = s.starts.iter().map(|&t| ns(t)).collect();
    let durations: Vec<i64> = s
        .ends
        .iter()
        .zip(&starts)
        .map(|(&e, &st)| ns(e).wrapping_sub(st))
        .collect();
    enc.encode(&seq(starts), &mut buf);
    enc.encode(&seq(durations), &mut buf);
    buf
}

/// A stream key as the native formats write it: `uvar len, module, uvar len, file,
/// ivar rank, u8 op`.
pub(crate) fn put_key(key: &StreamKey, buf: &mut Vec<u8>) {
    for text in [&key.module, &key.file] {
        put_uvarint(buf, text.len() as u64);
        buf.extend_from_slice(text.as_bytes());
    }
    crate::codec::put_ivarint(buf, key.rank);
    buf.push(key.op as u8);
}

/// Reads a key written by [`put_key`].
pub(crate) fn get_key(c: &mut Cursor) -> Result<StreamKey> {
    let mut text = || -> Result<String> {
        let n = c.count(c.remaining(), "string")?;
        let raw = c.take(n)?;
        String::from_utf8(raw.to_vec()).map_err(|_| c.error("stream name is not UTF-8"))
    };
    let (module, file) = (text()?, text()?);
    let rank = c.ivarint()?;
    let op = match c.u8()? {
        0 => Op::Read,
        1 => Op::Write,
        other => return Err(c.error(format!("unknown op {other}"))),
    };
    Ok(StreamKey {
        module,
        file,
        rank,
        op,
    })
}

fn decode_chunk(
    dec: &mut SeqDecoder,
    payload: &[u8],
    at: usize,
    keys: &mut Vec<StreamKey>,
    streams: &mut Vec<Stream>,
) -> Result<()> {
    let mut c = Cursor::with_base(payload, at);
    let reference = c.uvarint()?;
    let key_index = if reference == 0 {
        keys.push(get_key(&mut c)?);
        streams.push(Stream::new(keys.last().unwrap().clone()));
        keys.len() - 1
    } else {
        let i = (reference - 1) as usize;
        if i >= keys.len() {
            return Err(c.error(format!("reference to unknown stream {i}")));
        }
        i
    };
    let offsets = dec.decode(&mut c)?;
    let lengths = dec.decode(&mut c)?;
    let starts = dec.decode(&mut c)?;
    let durations = dec.decode(&mut c)?;
    let n = offsets.len();
    if [lengths.len(), starts.len(), durations.len()] != [n; 3] {
        return Err(c.error("record columns differ in length"));
    }
    if n > MAX_FRAME_RECORDS as u64 {
        return Err(c.error(format!(
            "frame holds {n} records, more than a frame may hold ({MAX_FRAME_RECORDS})"
        )));
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes in frame"));
    }
    let s = &mut streams[key_index];
    let (o, l, st, du) = (
        offsets.expand(),
        lengths.expand(),
        starts.expand(),
        durations.expand(),
    );
    for i in 0..n as usize {
        let start = st[i] as f64 / 1e9;
        s.push(
            o[i] as u64,
            l[i] as u64,
            start,
            st[i].wrapping_add(du[i]) as f64 / 1e9,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trace {
        let key = |rank, op| StreamKey {
            module: "POSIX".into(),
            file: "/data/a,\"b\".h5".into(),
            rank,
            op,
        };
        Trace::from_records((0..50u64).flat_map(|i| {
            [
                (
                    key(0, Op::Write),
                    i * 8192,
                    4096,
                    i as f64 * 0.5,
                    i as f64 * 0.5 + 0.25,
                ),
                (
                    key(1, Op::Read),
                    7 + i * i,
                    10,
                    1.0 + i as f64,
                    2.0 + i as f64,
                ),
            ]
        }))
    }

    #[test]
    fn csv_round_trip() {
        let t = sample();
        let mut buf = Vec::new();
        t.write_csv(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf).starts_with(CSV_HEADER));
        assert_eq!(Trace::parse_csv(&buf[..], "t.csv").unwrap(), t);
    }

    #[test]
    fn csv_errors_name_the_line() {
        let text =
            format!("{CSV_HEADER}\nPOSIX,f,0,read,1,2,0.1,0.2\nPOSIX,f,0,read,x,2,0.1,0.2\n");
        let e = Trace::parse_csv(text.as_bytes(), "bad.csv")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.csv:3:") && e.contains("offset"), "{e}");
        let e = Trace::parse_csv("a,b\n".as_bytes(), "h.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("h.csv:1") && e.contains("header"), "{e}");
        assert_eq!(
            Trace::parse_csv(format!("{CSV_HEADER}\n").as_bytes(), "e.csv").unwrap(),
            Trace::default()
        );
    }

    #[test]
    fn native_round_trip_and_truncation() {
        let t = sample();
        let bytes = t.encode_native(&Detector::default()).unwrap();
        let back = Trace::decode_native(&bytes).unwrap();
        assert!(back.damage.is_none());
        assert_eq!(back.trace, t);
        let cut = Trace::decode_native(&bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(cut.trace.streams.len(), 1);
        assert!(cut.damage.unwrap().contains("dropped"));
        assert!(Trace::decode_native(b"nope").is_err());
    }
}
