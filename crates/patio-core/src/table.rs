//! The sorted extent table: one entry per extent, binary search per lookup. It is the
//! classic log-structured index (and the remap "1-to-1 table" of the reorganization
//! slides), the baseline every pattern map is measured against, and the fallback for
//! mappings that do not compress. Also home of the extent normalisation both
//! structures share: newest-wins overlap resolution and coalescing.

use crate::codec::{read_blob, write_blob, Cursor};
use crate::error::{CoreError, Result};
use std::collections::BTreeMap;

/// One mapped range: `length` bytes at `logical` live at `physical` in chunk `chunk`.
/// Physical offsets are taken modulo 2^64 (they are only ever added to, as in the map).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    pub logical: u64,
    pub length: u64,
    pub physical: u64,
    pub chunk: u64,
}

impl Extent {
    pub fn new(logical: u64, length: u64, physical: u64, chunk: u64) -> Self {
        Extent {
            logical,
            length,
            physical,
            chunk,
        }
    }

    /// One past the last logical byte (saturating at `u64::MAX`).
    pub fn end(&self) -> u64 {
        self.logical.saturating_add(self.length)
    }

    fn continues(&self, next: &Extent) -> bool {
        self.end() == next.logical
            && self.chunk == next.chunk
            && self.physical.checked_add(self.length) == Some(next.physical)
    }
}

/// The answer to "what is at logical offset x?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Data: `len` contiguous bytes starting at `physical` in `chunk`, up to the next
    /// discontinuity (end of the extent).
    Data { chunk: u64, physical: u64, len: u64 },
    /// A hole of `len` bytes before the next mapped byte. Never end-of-file.
    Hole { len: u64 },
    /// No mapped byte at or after the offset. Whether that is end-of-file is for the
    /// caller (who knows the file size) to decide.
    Unmapped,
}

/// Sorts extents by logical offset, resolving overlaps so that later extents in the
/// input win (input order is write order), dropping empty extents, and merging
/// neighbours that continue each other logically and physically in the same chunk.
pub fn normalize(extents: &[Extent]) -> Vec<Extent> {
    let sorted_disjoint = extents.windows(2).all(|w| w[0].end() <= w[1].logical);
    let resolved: Vec<Extent> = if sorted_disjoint {
        extents.iter().copied().filter(|e| e.length > 0).collect()
    } else {
        resolve_newest_wins(extents)
    };
    coalesce(resolved)
}

fn resolve_newest_wins(extents: &[Extent]) -> Vec<Extent> {
    let mut live: BTreeMap<u64, Extent> = BTreeMap::new();
    for e in extents.iter().filter(|e| e.length > 0) {
        let (start, end) = (e.logical, e.end());
        // Pieces of older extents that overlap [start, end): trim or split them.
        let overlapping: Vec<u64> = live
            .range(..end)
            .rev()
            .take_while(|(_, old)| old.end() > start)
            .map(|(&k, _)| k)
            .collect();
        for k in overlapping {
            let old = live.remove(&k).expect("key just listed");
            if old.logical < start {
                live.insert(
                    old.logical,
                    Extent {
                        length: start - old.logical,
                        ..old
                    },
                );
            }
            if old.end() > end {
                let cut = end - old.logical;
                live.insert(
                    end,
                    Extent::new(
                        end,
                        old.end() - end,
                        old.physical.wrapping_add(cut),
                        old.chunk,
                    ),
                );
            }
        }
        live.insert(start, *e);
    }
    live.into_values().collect()
}

fn coalesce(extents: Vec<Extent>) -> Vec<Extent> {
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    for e in extents {
        match out.last_mut() {
            Some(prev) if prev.continues(&e) => prev.length += e.length,
            _ => out.push(e),
        }
    }
    out
}

/// Binary-searched table of sorted, disjoint extents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtentTable {
    extents: Vec<Extent>,
}

const TABLE_MAGIC: &[u8; 4] = b"PXTB";
const TABLE_VERSION: u16 = 1;

impl ExtentTable {
    /// Builds the table from extents in write order (later ones win on overlap).
    pub fn build(extents: &[Extent]) -> Self {
        ExtentTable {
            extents: normalize(extents),
        }
    }

    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    pub fn len(&self) -> usize {
        self.extents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    pub fn lookup(&self, x: u64) -> Lookup {
        let i = self.extents.partition_point(|e| e.logical <= x);
        if i > 0 {
            let e = &self.extents[i - 1];
            if x < e.end() {
                let into = x - e.logical;
                return Lookup::Data {
                    chunk: e.chunk,
                    physical: e.physical.wrapping_add(into),
                    len: e.length - into,
                };
            }
        }
        match self.extents.get(i) {
            Some(next) => Lookup::Hole {
                len: next.logical - x,
            },
            None => Lookup::Unmapped,
        }
    }

    /// Bytes held in memory.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.extents.len() * std::mem::size_of::<Extent>()
    }

    /// Fixed-width little-endian encoding: 32 bytes per extent in a checksummed blob.
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(8 + 32 * self.extents.len());
        payload.extend_from_slice(&(self.extents.len() as u64).to_le_bytes());
        for e in &self.extents {
            for v in [e.logical, e.length, e.physical, e.chunk] {
                payload.extend_from_slice(&v.to_le_bytes());
            }
        }
        write_blob(TABLE_MAGIC, TABLE_VERSION, &payload)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (_, payload) = read_blob(TABLE_MAGIC, TABLE_VERSION, bytes)?;
        let mut c = Cursor::with_base(payload, crate::codec::BLOB_HEADER);
        let n = c.u64_le()?;
        if n.checked_mul(32) != Some(c.remaining() as u64) {
            return Err(c.error(format!(
                "{n} extents announced, {} bytes present",
                c.remaining()
            )));
        }
        let mut extents = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let e = Extent::new(c.u64_le()?, c.u64_le()?, c.u64_le()?, c.u64_le()?);
            if let Some(prev) = extents.last() {
                let prev: &Extent = prev;
                if prev.end() > e.logical {
                    return Err(CoreError::corrupt(
                        c.position() - 32,
                        "extents out of order or overlapping",
                    ));
                }
            }
            extents.push(e);
        }
        Ok(ExtentTable { extents })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_wins_splits_older_extents() {
        let t = ExtentTable::build(&[Extent::new(0, 100, 0, 1), Extent::new(40, 10, 500, 2)]);
        assert_eq!(
            t.extents(),
            [
                Extent::new(0, 40, 0, 1),
                Extent::new(40, 10, 500, 2),
                Extent::new(50, 50, 50, 1)
            ]
        );
        assert_eq!(
            t.lookup(45),
            Lookup::Data {
                chunk: 2,
                physical: 505,
                len: 5
            }
        );
        assert_eq!(t.lookup(100), Lookup::Unmapped);
    }

    #[test]
    fn holes_are_not_end_of_file() {
        let t = ExtentTable::build(&[Extent::new(10, 5, 0, 0), Extent::new(30, 5, 5, 0)]);
        assert_eq!(t.lookup(0), Lookup::Hole { len: 10 });
        assert_eq!(t.lookup(15), Lookup::Hole { len: 15 });
        assert_eq!(
            t.lookup(34),
            Lookup::Data {
                chunk: 0,
                physical: 9,
                len: 1
            }
        );
        assert_eq!(t.lookup(35), Lookup::Unmapped);
    }

    #[test]
    fn contiguous_runs_coalesce() {
        let t = ExtentTable::build(&[
            Extent::new(0, 4, 0, 0),
            Extent::new(4, 4, 4, 0),
            Extent::new(8, 4, 100, 0),
        ]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.lookup(1),
            Lookup::Data {
                chunk: 0,
                physical: 1,
                len: 7
            }
        );
    }
}
