//! The pattern map: a logical→physical mapping stored as pattern entries and queried
//! without expanding them (the local and global pattern index of pattern PLFS,
//! Algorithms 2 and 3, generalised to anything the unit notation and the pattern
//! tree describe).
//!
//! Building: extents are normalised (newest wins on overlap, contiguous runs merged),
//! the logical offsets are patterned first, and every logical piece becomes an entry
//! whose lengths, physical offsets and chunk ids are patterned separately. Entries
//! are global: extents of different chunks that abut fall into one entry, and the
//! chunk-id column is itself a pattern (`0, 1, …, W-1` repeated is one node).
//!
//! Lookup: binary search over entries by first offset, then the position of the
//! largest logical offset ≤ x inside the entry in O(k) per nesting level, then the
//! length, physical offset and chunk at that position.
//!
//! Logical offsets and ends must stay below 2^63 (an 8 EiB file); lengths, physical
//! offsets and chunk ids may use the full `u64` range.

use crate::codec::{put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use crate::detect::Detector;
use crate::entropy::{get_section, section_if_smaller, Effort};
use crate::error::{CoreError, Result};
use crate::seqcodec::{SeqDecoder, SeqEncoder};
use crate::table::normalize;
pub use crate::table::{Extent, Lookup};
use crate::tree::{nest, PatternSeq, Piece};

const MAP_MAGIC: &[u8; 4] = b"PMAP";
/// Version 2 puts a form byte before the entries: `0` plain, `1` block-coded section
/// (`entropy::section_if_smaller`). Version 1 (plain entries, no form byte) is read.
const MAP_VERSION: u16 = 2;
const FORM_PLAIN: u8 = 0;
const FORM_SECTION: u8 = 1;
/// Larger payloads are coded with [`Effort::Fast`] (every codec trial on megabytes of
/// literal entries would cost seconds).
const BEST_EFFORT_BYTES: usize = 1 << 18;

/// One group of extents whose logical offsets form one piece.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    logical: Piece,
    lengths: PatternSeq,
    physical: PatternSeq,
    chunks: PatternSeq,
}

impl Entry {
    fn extent(&self, i: u64) -> Extent {
        Extent::new(
            self.logical.get(i) as u64,
            self.lengths.get(i).expect("columns have equal length") as u64,
            self.physical.get(i).expect("columns have equal length") as u64,
            self.chunks.get(i).expect("columns have equal length") as u64,
        )
    }
}

/// A logical→physical map made of pattern entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatternMap {
    entries: Vec<Entry>,
    /// First logical offset of each entry, for the outer binary search.
    firsts: Vec<i64>,
    extent_count: u64,
}

/// Statistics that reports show about a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapStats {
    pub entries: usize,
    pub pattern_entries: usize,
    pub extents: u64,
    pub mem_bytes: usize,
}

impl PatternMap {
    /// Builds the map from extents in write order (later extents win on overlap).
    pub fn build(extents: &[Extent], detector: &Detector) -> Result<Self> {
        if let Some(e) = extents.iter().find(|e| {
            e.logical
                .checked_add(e.length)
                .is_none_or(|end| end > i64::MAX as u64)
        }) {
            return Err(CoreError::Invalid(format!(
                "extent at logical offset {} with length {} ends beyond 2^63-1",
                e.logical, e.length
            )));
        }
        let extents = normalize(extents);
        let logical: Vec<i64> = extents.iter().map(|e| e.logical as i64).collect();
        let pieces = absorb_short_nodes(nest(detector.detect(&logical), detector));
        let mut entries = Vec::with_capacity(pieces.len());
        let mut at = 0usize;
        for piece in pieces {
            let group = &extents[at..at + piece.len() as usize];
            at += group.len();
            let column = |f: fn(&Extent) -> u64| {
                let values: Vec<i64> = group.iter().map(|e| f(e) as i64).collect();
                PatternSeq::build(&values, detector)
            };
            entries.push(Entry {
                lengths: column(|e| e.length),
                physical: column(|e| e.physical),
                chunks: column(|e| e.chunk),
                logical: piece,
            });
        }
        Ok(Self::from_entries(entries))
    }

    fn from_entries(entries: Vec<Entry>) -> Self {
        let firsts = entries.iter().map(|e| e.logical.first()).collect();
        let extent_count = entries.iter().map(|e| e.logical.len()).sum();
        PatternMap {
            entries,
            firsts,
            extent_count,
        }
    }

    /// Merges maps (e.g. one per writer) into one global map. Later maps win where
    /// they overlap earlier ones.
    pub fn merge(maps: &[PatternMap], detector: &Detector) -> Result<Self> {
        let all: Vec<Extent> = maps.iter().flat_map(|m| m.extents()).collect();
        Self::build(&all, detector)
    }

    pub fn lookup(&self, x: u64) -> Lookup {
        if x > i64::MAX as u64 {
            return Lookup::Unmapped;
        }
        let xi = x as i64;
        let idx = self.firsts.partition_point(|&f| f <= xi);
        if idx == 0 {
            return match self.firsts.first() {
                Some(&f) => Lookup::Hole { len: f as u64 - x },
                None => Lookup::Unmapped,
            };
        }
        let entry = &self.entries[idx - 1];
        let pos = entry
            .logical
            .position_at_or_below(xi)
            .expect("entry starts at or below x");
        let start = entry.logical.get(pos) as u64;
        let len = entry.lengths.get(pos).expect("columns have equal length") as u64;
        if x - start < len {
            let into = x - start;
            let physical = entry.physical.get(pos).expect("columns have equal length") as u64;
            let chunk = entry.chunks.get(pos).expect("columns have equal length") as u64;
            return Lookup::Data {
                chunk,
                physical: physical.wrapping_add(into),
                len: len - into,
            };
        }
        let next = if pos + 1 < entry.logical.len() {
            Some(entry.logical.get(pos + 1))
        } else {
            self.firsts.get(idx).copied()
        };
        match next {
            Some(n) => Lookup::Hole { len: n as u64 - x },
            None => Lookup::Unmapped,
        }
    }

    /// All extents in logical order (expansion; for merging, export and checks).
    pub fn extents(&self) -> impl Iterator<Item = Extent> + '_ {
        self.entries
            .iter()
            .flat_map(|e| (0..e.logical.len()).map(move |i| e.extent(i)))
    }

    /// One past the last mapped byte (0 for an empty map).
    pub fn end(&self) -> u64 {
        self.entries.last().map_or(0, |e| {
            let last = e.extent(e.logical.len() - 1);
            last.end()
        })
    }

    pub fn stats(&self) -> MapStats {
        MapStats {
            entries: self.entries.len(),
            pattern_entries: self
                .entries
                .iter()
                .filter(|e| matches!(e.logical, Piece::Node(_)))
                .count(),
            extents: self.extent_count,
            mem_bytes: self.mem_bytes(),
        }
    }

    /// Bytes held in memory by the entries and the search index.
    pub fn mem_bytes(&self) -> usize {
        let entries: usize = self
            .entries
            .iter()
            .map(|e| {
                PatternSeq::from_pieces(vec![e.logical.clone()]).mem_bytes()
                    + e.lengths.mem_bytes()
                    + e.physical.mem_bytes()
                    + e.chunks.mem_bytes()
            })
            .sum();
        std::mem::size_of::<Self>() + entries + self.firsts.len() * 8
    }

    /// Human-readable entries, one per line (for `--json` reports and debugging).
    pub fn describe(&self) -> Vec<String> {
        let seq = |s: &PatternSeq| {
            s.pieces()
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        self.entries
            .iter()
            .map(|e| {
                format!(
                    "logical {} length {} physical {} chunk {}",
                    e.logical,
                    seq(&e.lengths),
                    seq(&e.physical),
                    seq(&e.chunks)
                )
            })
            .collect()
    }

    /// Versioned, checksummed encoding (docs/FORMATS.md, "Pattern map").
    pub fn encode(&self) -> Vec<u8> {
        write_blob(MAP_MAGIC, MAP_VERSION, &self.formed_payload())
    }

    /// The entries, plain (the payload of version 1).
    fn entries_payload(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        put_uvarint(&mut payload, self.entries.len() as u64);
        let mut enc = SeqEncoder::new();
        let logical =
            PatternSeq::from_pieces(self.entries.iter().map(|e| e.logical.clone()).collect());
        enc.encode(&logical, &mut payload);
        for e in &self.entries {
            enc.encode(&e.lengths, &mut payload);
            enc.encode(&e.physical, &mut payload);
            enc.encode(&e.chunks, &mut payload);
        }
        payload
    }

    /// Wraps the entries in a form byte and coded when that is smaller.
    fn formed_payload(&self) -> Vec<u8> {
        let payload = self.entries_payload();
        let effort = if payload.len() <= BEST_EFFORT_BYTES {
            Effort::Best
        } else {
            Effort::Fast
        };
        let mut formed = Vec::with_capacity(payload.len() + 1);
        match section_if_smaller(&payload, effort) {
            Some(section) => {
                formed.push(FORM_SECTION);
                formed.extend_from_slice(&section);
            }
            None => {
                formed.push(FORM_PLAIN);
                formed.extend_from_slice(&payload);
            }
        }
        formed
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (version, payload) = read_blob(MAP_MAGIC, MAP_VERSION, bytes)?;
        let mut outer = Cursor::with_base(payload, BLOB_HEADER);
        let decoded;
        let (payload, base) = if version == 1 {
            (payload, BLOB_HEADER)
        } else {
            match outer.u8()? {
                FORM_PLAIN => (&payload[1..], BLOB_HEADER + 1),
                FORM_SECTION => {
                    decoded = get_section(&mut outer, "pattern map")?;
                    if !outer.is_at_end() {
                        return Err(outer.error("trailing bytes after the coded entries"));
                    }
                    // Offsets in errors below are in the decoded entries.
                    (&decoded[..], 0)
                }
                other => return Err(outer.error(format!("unknown map form {other}"))),
            }
        };
        let mut c = Cursor::with_base(payload, base);
        let n = c.count(c.remaining(), "entry")?;
        let mut dec = SeqDecoder::new();
        let logical = dec.decode(&mut c)?;
        if logical.pieces().len() != n {
            return Err(c.error(format!(
                "{n} entries announced, {} logical pieces found",
                logical.pieces().len()
            )));
        }
        let mut entries = Vec::with_capacity(n);
        let mut prev_last: Option<i64> = None;
        for piece in logical.pieces() {
            let at = c.position();
            let sorted = match piece {
                Piece::Node(node) => node.body.min_step().is_none_or(|s| s > 0),
                Piece::Literal(v) => v.windows(2).all(|w| w[0] < w[1]),
            };
            if !sorted || prev_last.is_some_and(|p| p >= piece.first()) || piece.first() < 0 {
                return Err(CoreError::corrupt(at, "logical offsets out of order"));
            }
            prev_last = Some(piece.last());
            let lengths = dec.decode(&mut c)?;
            let physical = dec.decode(&mut c)?;
            let chunks = dec.decode(&mut c)?;
            if [lengths.len(), physical.len(), chunks.len()] != [piece.len(); 3] {
                return Err(CoreError::corrupt(at, "entry columns differ in length"));
            }
            entries.push(Entry {
                logical: piece.clone(),
                lengths,
                physical,
                chunks,
            });
        }
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the last entry"));
        }
        Ok(Self::from_entries(entries))
    }
}

/// Entries shorter than this are not worth their own search step and columns: their
/// extents join the neighbouring literal run, which is searched like an extent table.
const MIN_ENTRY_EXTENTS: u64 = 16;

/// Turns nodes of fewer than [`MIN_ENTRY_EXTENTS`] values into literals, merged with
/// neighbouring literal runs.
fn absorb_short_nodes(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let values = match piece {
            Piece::Node(n) if n.len() >= MIN_ENTRY_EXTENTS => {
                out.push(Piece::Node(n));
                continue;
            }
            Piece::Node(n) => (0..n.len()).map(|i| n.get(i)).collect(),
            Piece::Literal(v) => v,
        };
        match out.last_mut() {
            Some(Piece::Literal(prev)) => prev.extend(values),
            _ => out.push(Piece::Literal(values)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::ExtentTable;

    fn n1_strided(writers: u64, writes: u64, block: u64) -> Vec<Extent> {
        (0..writes)
            .flat_map(|i| {
                (0..writers)
                    .map(move |w| Extent::new((i * writers + w) * block, block, i * block, w))
            })
            .collect()
    }

    #[test]
    fn n1_strided_becomes_one_global_entry() {
        let extents = n1_strided(64, 100, 4096);
        let map = PatternMap::build(&extents, &Detector::default()).unwrap();
        assert_eq!(map.stats().entries, 1, "{:?}", map.describe());
        let table = ExtentTable::build(&extents);
        for x in (0..64 * 100 * 4096 + 10).step_by(1531) {
            assert_eq!(map.lookup(x), table.lookup(x), "x = {x}");
        }
        assert!(map.encode().len() < 80, "{} bytes", map.encode().len());
        assert_eq!(PatternMap::decode(&map.encode()).unwrap(), map);
    }

    #[test]
    fn irregular_maps_are_block_coded_and_version_1_still_reads() {
        // Irregular extents: literal columns the block coder shrinks.
        let extents: Vec<Extent> = (0..3000u64)
            .map(|i| {
                Extent::new(
                    i * 9000 + (i * i % 977) * 8,
                    4096 + i % 3 * 512,
                    i * 4096,
                    i % 5,
                )
            })
            .collect();
        let map = PatternMap::build(&extents, &Detector::default()).unwrap();
        let plain = map.entries_payload();
        let bytes = map.encode();
        assert!(
            bytes.len() < plain.len(),
            "{} ≥ {}",
            bytes.len(),
            plain.len()
        );
        assert_eq!(bytes[BLOB_HEADER], FORM_SECTION);
        assert_eq!(PatternMap::decode(&bytes).unwrap(), map);
        let v1 = write_blob(MAP_MAGIC, 1, &plain);
        assert_eq!(PatternMap::decode(&v1).unwrap(), map);
        for cut in (0..bytes.len()).step_by(7) {
            assert!(PatternMap::decode(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn strided_with_holes() {
        let extents: Vec<Extent> = (0..1000)
            .map(|i| Extent::new(i * 8192, 4096, i * 4096, 0))
            .collect();
        let map = PatternMap::build(&extents, &Detector::default()).unwrap();
        assert_eq!(map.lookup(4096), Lookup::Hole { len: 4096 });
        assert_eq!(
            map.lookup(8192 + 10),
            Lookup::Data {
                chunk: 0,
                physical: 4106,
                len: 4086
            }
        );
        assert_eq!(map.lookup(999 * 8192 + 4096), Lookup::Unmapped);
        assert_eq!(map.end(), 999 * 8192 + 4096);
    }

    #[test]
    fn offsets_beyond_2_63_are_refused() {
        let e = [Extent::new(i64::MAX as u64, 2, 0, 0)];
        assert!(PatternMap::build(&e, &Detector::default()).is_err());
    }
}
