//! Index records: what a writer appends to its index log at each flush, one
//! checksummed frame each (docs/FORMATS.md, "Container index record").
//!
//! A record holds the writes since the previous record, in write order, each as
//! `(logical offset, length, physical offset in the writer's data log)`, and a key:
//! the time of the flush in nanoseconds, strictly increasing per writer. Keys order
//! records of different writers (newest wins on overlap); inside a record, write
//! order decides.
//!
//! In `pattern` mode the three columns are pattern sequences (one strided unit for
//! a whole N-1 strided checkpoint); in `raw` mode they are fixed 24-byte entries,
//! the classic one-entry-per-write index, with contiguous runs merged by the writer.
//! A pattern record whose columns the block coder (`patio_core::entropy`, fast effort)
//! shrinks is written as kind 3, the same columns as one coded section; kind 1 stays
//! the form of records coding does not shrink (strided ones, tens of bytes).

use crate::error::{ContainerError, Result};
use crate::layout::IndexMode;
use patio_core::codec::{put_uvarint, Cursor};
use patio_core::entropy::{get_section, section_if_smaller, Effort};
use patio_core::seqcodec::{SeqDecoder, SeqEncoder};
use patio_core::{Detector, PatternSeq};
use std::path::Path;

const KIND_PATTERN: u8 = 1;
const KIND_RAW: u8 = 2;
const KIND_PATTERN_CODED: u8 = 3;
/// Most writes one record may describe; writers flush long before (decoders refuse
/// more, so a damaged count cannot make a reader expand billions of entries).
pub const MAX_RECORD_WRITES: u64 = 1 << 26;

/// One write as the index sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub logical: u64,
    pub length: u64,
    pub physical: u64,
}

impl IndexEntry {
    pub fn end(&self) -> u64 {
        self.logical + self.length
    }

    /// True when `next` continues this entry logically and physically.
    pub fn continued_by(&self, next: &IndexEntry) -> bool {
        self.end() == next.logical && self.physical + self.length == next.physical
    }
}

/// The entries of a record, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Columns {
    Pattern {
        logical: PatternSeq,
        lengths: PatternSeq,
        physical: PatternSeq,
    },
    Raw(Vec<IndexEntry>),
}

impl Columns {
    pub fn len(&self) -> u64 {
        match self {
            Columns::Pattern { logical, .. } => logical.len(),
            Columns::Raw(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i` (expansion of one element).
    pub fn get(&self, i: u64) -> IndexEntry {
        match self {
            Columns::Pattern {
                logical,
                lengths,
                physical,
            } => IndexEntry {
                logical: logical.get(i).expect("index in range") as u64,
                length: lengths.get(i).expect("index in range") as u64,
                physical: physical.get(i).expect("index in range") as u64,
            },
            Columns::Raw(v) => v[i as usize],
        }
    }
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: u64,
    /// Write calls the record covers (more than its entries when runs were merged).
    pub writes: u64,
    pub columns: Columns,
}

/// Encodes a record payload from entries in write order.
pub fn encode(
    mode: IndexMode,
    key: u64,
    writes: u64,
    entries: &[IndexEntry],
    detector: &Detector,
) -> Vec<u8> {
    let mut out = Vec::new();
    match mode {
        IndexMode::Pattern => {
            let column = |f: fn(&IndexEntry) -> u64| {
                let v: Vec<i64> = entries.iter().map(|e| f(e) as i64).collect();
                PatternSeq::build(&v, detector)
            };
            let mut body = Vec::new();
            let mut enc = SeqEncoder::new();
            enc.encode(&column(|e| e.logical), &mut body);
            enc.encode(&column(|e| e.length), &mut body);
            enc.encode(&column(|e| e.physical), &mut body);
            let coded = section_if_smaller(&body, Effort::Fast);
            out.push(if coded.is_some() {
                KIND_PATTERN_CODED
            } else {
                KIND_PATTERN
            });
            out.extend_from_slice(&key.to_le_bytes());
            put_uvarint(&mut out, writes);
            out.extend_from_slice(coded.as_deref().unwrap_or(&body));
        }
        IndexMode::Raw => {
            out.push(KIND_RAW);
            out.extend_from_slice(&key.to_le_bytes());
            put_uvarint(&mut out, writes);
            put_uvarint(&mut out, entries.len() as u64);
            out.reserve(entries.len() * 24);
            for e in entries {
                out.extend_from_slice(&e.logical.to_le_bytes());
                out.extend_from_slice(&e.length.to_le_bytes());
                out.extend_from_slice(&e.physical.to_le_bytes());
            }
        }
    }
    out
}

/// The key of a record payload without decoding the rest (`None`: too short).
pub fn key_of(payload: &[u8]) -> Option<u64> {
    payload
        .get(1..9)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Decodes and validates one record payload found at byte `at` of `path`.
pub fn decode(path: &Path, at: usize, payload: &[u8]) -> Result<Record> {
    let fail = |e: patio_core::CoreError| ContainerError::in_file(path, e);
    let mut c = Cursor::with_base(payload, at);
    let kind = c.u8().map_err(fail)?;
    let key = c.u64_le().map_err(fail)?;
    let writes = c.uvarint().map_err(fail)?;
    let columns = match kind {
        KIND_PATTERN => pattern_columns(&mut c).map_err(fail)?,
        KIND_PATTERN_CODED => {
            let body = get_section(&mut c, "record columns").map_err(fail)?;
            // Offsets in errors inside the columns are in the decoded section.
            let mut b = Cursor::new(&body);
            let columns = pattern_columns(&mut b).map_err(fail)?;
            if !b.is_at_end() {
                return Err(fail(b.error("trailing bytes after the coded columns")));
            }
            columns
        }
        KIND_RAW => {
            let n = c.count(c.remaining() / 24, "entry").map_err(fail)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(IndexEntry {
                    logical: c.u64_le().map_err(fail)?,
                    length: c.u64_le().map_err(fail)?,
                    physical: c.u64_le().map_err(fail)?,
                });
            }
            Columns::Raw(v)
        }
        other => {
            return Err(fail(patio_core::CoreError::corrupt(
                at,
                format!("unknown record kind {other}"),
            )))
        }
    };
    if !c.is_at_end() {
        return Err(fail(c.error("trailing bytes after the record")));
    }
    let record = Record {
        key,
        writes,
        columns,
    };
    validate(&record).map_err(|reason| ContainerError::Corrupt {
        path: path.display().to_string(),
        offset: at as u64,
        reason,
    })?;
    Ok(record)
}

/// The three pattern columns of a record.
fn pattern_columns(c: &mut Cursor) -> patio_core::Result<Columns> {
    let mut dec = SeqDecoder::new();
    let logical = dec.decode(c)?;
    let lengths = dec.decode(c)?;
    let physical = dec.decode(c)?;
    let n = logical.len();
    if lengths.len() != n || physical.len() != n {
        return Err(c.error("record columns differ in length"));
    }
    if n > MAX_RECORD_WRITES {
        return Err(c.error(format!(
            "record of {n} entries (at most {MAX_RECORD_WRITES} allowed)"
        )));
    }
    Ok(Columns::Pattern {
        logical,
        lengths,
        physical,
    })
}

/// Checks what a reader relies on: offsets and ends below 2^63, non-empty entries.
/// Pattern columns are checked at their extremes without expansion.
fn validate(r: &Record) -> std::result::Result<(), String> {
    const LIMIT: u64 = i64::MAX as u64;
    let ok = |e: &IndexEntry| {
        e.length > 0
            && e.length <= LIMIT
            && e.logical <= LIMIT
            && e.physical <= LIMIT
            && e.logical.checked_add(e.length).is_some_and(|x| x <= LIMIT)
            && e.physical.checked_add(e.length).is_some_and(|x| x <= LIMIT)
    };
    match &r.columns {
        Columns::Raw(v) => match v.iter().position(|e| !ok(e)) {
            Some(i) => Err(format!(
                "entry {i} has an empty length or an offset beyond 2^63"
            )),
            None => Ok(()),
        },
        Columns::Pattern {
            logical,
            lengths,
            physical,
        } => {
            // The columns' extremes decide without expansion when they fit; they are
            // taken column by column, so a record may fail them while every entry
            // fits (a write near 2^63 beside a long write near 0): then each entry
            // is checked, as for raw records.
            let (lmin, lmax) = extremes(logical);
            let (nmin, nmax) = extremes(lengths);
            let (pmin, pmax) = extremes(physical);
            let end = |a: i64, b: i64| (a as i128 + b as i128) <= LIMIT as i128;
            if lmin >= 0 && pmin >= 0 && nmin > 0 && end(lmax, nmax) && end(pmax, nmax) {
                return Ok(());
            }
            match (0..r.columns.len()).find(|&i| !ok(&r.columns.get(i))) {
                Some(i) => Err(format!(
                    "entry {i} has an empty length or an offset beyond 2^63"
                )),
                None => Ok(()),
            }
        }
    }
}

/// Smallest and largest value of a sequence (pieces are checked at their extremes).
fn extremes(seq: &PatternSeq) -> (i64, i64) {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    for p in seq.pieces() {
        match p {
            patio_core::Piece::Literal(v) => {
                for &x in v {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
            patio_core::Piece::Node(n) => {
                // Units and nested bodies reach their extremes at the ends of some
                // level; the body's min/max offsets bound them.
                let (a, b) = body_bounds(&n.body);
                lo = lo.min((n.init as i128 + a) as i64);
                hi = hi.max((n.init as i128 + b).min(i64::MAX as i128) as i64);
            }
        }
    }
    if seq.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}

/// The lowest and highest offset a body reaches from its first value.
fn body_bounds(body: &patio_core::Body) -> (i128, i128) {
    match body {
        patio_core::Body::Flat(s) => (s.min_offset(), s.max_offset()),
        patio_core::Body::Nested(o, i) => {
            let (oa, ob) = body_bounds(o);
            let (ia, ib) = body_bounds(i);
            (oa + ia, ob + ib)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<IndexEntry> {
        (0..1000u64)
            .map(|i| IndexEntry {
                logical: i * 8 * 4096 + 3 * 4096,
                length: 4096,
                physical: i * 4096,
            })
            .collect()
    }

    #[test]
    fn both_modes_round_trip() {
        let d = Detector::default();
        for mode in [IndexMode::Pattern, IndexMode::Raw] {
            let payload = encode(mode, 77, 1000, &entries(), &d);
            let r = decode(Path::new("x"), 0, &payload).unwrap();
            assert_eq!(r.key, 77);
            assert_eq!(r.writes, 1000);
            let back: Vec<IndexEntry> = (0..r.columns.len()).map(|i| r.columns.get(i)).collect();
            assert_eq!(back, entries());
            if mode == IndexMode::Pattern {
                assert!(payload.len() < 64, "{} bytes", payload.len());
            }
        }
    }

    /// A kind-1 record of irregular writes, as writers before kind 3 left it, reads.
    #[test]
    fn plain_irregular_records_still_read() {
        let d = Detector::default();
        let v: Vec<i64> = (0..2000i64).map(|i| (i * 7919 % 2000) * 65536).collect();
        let lengths = vec![4096i64; 2000];
        let physical: Vec<i64> = (0..2000i64).map(|i| i * 4096).collect();
        let mut old = vec![KIND_PATTERN];
        old.extend_from_slice(&5u64.to_le_bytes());
        put_uvarint(&mut old, 2000);
        let mut enc = SeqEncoder::new();
        for col in [&v, &lengths, &physical] {
            enc.encode(&PatternSeq::build(col, &d), &mut old);
        }
        let r = decode(Path::new("x"), 0, &old).unwrap();
        assert_eq!(r.columns.get(7).logical, (7 * 7919 % 2000) * 65536);
        let entries: Vec<IndexEntry> = (0..2000)
            .map(|i| IndexEntry {
                logical: v[i] as u64,
                length: 4096,
                physical: physical[i] as u64,
            })
            .collect();
        let new = encode(IndexMode::Pattern, 5, 2000, &entries, &d);
        assert_eq!(new[0], KIND_PATTERN_CODED);
        assert!(new.len() < old.len(), "{} ≥ {}", new.len(), old.len());
        assert_eq!(decode(Path::new("x"), 0, &new).unwrap(), r);
    }

    #[test]
    fn damaged_payloads_are_refused() {
        let d = Detector::default();
        let payload = encode(IndexMode::Pattern, 1, 1000, &entries(), &d);
        for cut in 0..payload.len() {
            assert!(decode(Path::new("x"), 0, &payload[..cut]).is_err());
        }
        let mut bad = payload.clone();
        bad[0] = 9;
        assert!(decode(Path::new("x"), 0, &bad).is_err());
        let neg = [IndexEntry {
            logical: u64::MAX - 10,
            length: 4,
            physical: 0,
        }];
        let p = encode(IndexMode::Raw, 1, 1, &neg, &d);
        assert!(decode(Path::new("x"), 0, &p).is_err());
    }
}
