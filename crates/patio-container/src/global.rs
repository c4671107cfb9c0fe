//! The global index a reader serves reads through: every writer's segments and loose
//! writes merged into one logical→physical map (section 2.4 of the pattern-PLFS
//! paper, generalised).
//!
//! Merging works on patterns, never expanding them on the common path:
//! 1. writes a truncation cuts are expanded and clipped;
//! 2. segments are grouped into *clusters* whose byte spans overlap (transitively);
//!    distinct clusters cannot overlap in bytes;
//! 3. a cluster of segments that share a stride and a count and whose first rows
//!    tile one stride without overlap becomes one [`Tile`] — the global pattern: the
//!    writers' strided patterns interleaved, with offset, length, chunk and physical
//!    columns that are themselves pattern sequences (`0, 1, …, W-1` is one node). A
//!    loose write may lie in a tile's holes (a lookup there asks the rest); a tile
//!    that shares a byte with a loose write is not kept;
//! 4. everything else (overlaps, irregular writes) is expanded, ordered by
//!    `Order` so that the newest write wins, and built into a [`PatternMap`] — or,
//!    in a raw-mode container, into the classic sorted [`ExtentTable`].

use crate::layout::Truncation;
use crate::segments::{Loose, Segment};
use patio_core::{Detector, Extent, ExtentTable, Lookup, PatternMap, PatternSeq};

/// Interleaved strided writes of several writers: `rows` repetitions of one stride,
/// each holding one write per column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    first: u64,
    stride: u64,
    rows: u64,
    end: u64,
    /// Column offsets inside a stride, ascending, starting at 0.
    offsets: PatternSeq,
    lengths: PatternSeq,
    chunks: PatternSeq,
    phys: PatternSeq,
    phys_steps: PatternSeq,
}

impl Tile {
    /// A tile from segments sorted by first offset, or `None` when they do not form
    /// one (different strides or counts, overlapping or spilling columns).
    fn build(segs: &[&Segment], detector: &Detector) -> Option<Tile> {
        let head = segs[0];
        let (stride, rows) = (head.stride, head.count);
        if rows < 2 || segs.iter().any(|s| s.stride != stride || s.count != rows) {
            return None;
        }
        for pair in segs.windows(2) {
            if pair[0].first + pair[0].length > pair[1].first {
                return None;
            }
        }
        let last = segs[segs.len() - 1];
        if last.first + last.length - head.first > stride {
            return None;
        }
        let column = |f: &dyn Fn(&Segment) -> u64| {
            let v: Vec<i64> = segs.iter().map(|s| f(s) as i64).collect();
            PatternSeq::build(&v, detector)
        };
        Some(Tile {
            first: head.first,
            stride,
            rows,
            end: segs.iter().map(|s| s.end()).max().expect("non-empty"),
            offsets: column(&|s| s.first - head.first),
            lengths: column(&|s| s.length),
            chunks: column(&|s| s.chunk as u64),
            phys: column(&|s| s.phys),
            phys_steps: column(&|s| s.phys_step),
        })
    }

    fn col(seq: &PatternSeq, j: u64) -> u64 {
        seq.get(j).expect("column in range") as u64
    }

    /// Lookup of `x` in `first ≤ x < end`.
    fn lookup(&self, x: u64) -> Lookup {
        let r = x - self.first;
        let row = r / self.stride;
        let rem = (r % self.stride) as i64;
        let j = self
            .offsets
            .position_at_or_below(rem)
            .expect("the first column is at offset 0");
        let (d, len) = (Self::col(&self.offsets, j), Self::col(&self.lengths, j));
        let into = rem as u64 - d;
        if into < len {
            let phys = Self::col(&self.phys, j) + row * Self::col(&self.phys_steps, j);
            return Lookup::Data {
                chunk: Self::col(&self.chunks, j),
                physical: phys + into,
                len: len - into,
            };
        }
        let next = if j + 1 < self.offsets.len() {
            self.first + row * self.stride + Self::col(&self.offsets, j + 1)
        } else if row + 1 < self.rows {
            self.first + (row + 1) * self.stride
        } else {
            self.end
        };
        Lookup::Hole { len: next - x }
    }

    /// True when a byte of `a .. b` is one of the tile's.
    fn overlaps(&self, a: u64, b: u64) -> bool {
        let (from, to) = (a.max(self.first), b.min(self.end));
        from < to
            && match self.lookup(from) {
                Lookup::Hole { len } => from + len < to,
                _ => true,
            }
    }

    fn columns(&self) -> u64 {
        self.offsets.len()
    }

    fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + [
                &self.offsets,
                &self.lengths,
                &self.chunks,
                &self.phys,
                &self.phys_steps,
            ]
            .iter()
            .map(|s| s.mem_bytes())
            .sum::<usize>()
    }

    /// The tile's extents in logical order.
    fn extents(&self) -> impl Iterator<Item = Extent> + '_ {
        let cols = self.columns();
        (0..self.rows).flat_map(move |row| {
            (0..cols).map(move |j| {
                Extent::new(
                    self.first + row * self.stride + Self::col(&self.offsets, j),
                    Self::col(&self.lengths, j),
                    Self::col(&self.phys, j) + row * Self::col(&self.phys_steps, j),
                    Self::col(&self.chunks, j),
                )
            })
        })
    }

    pub fn describe(&self) -> String {
        format!(
            "tile at {}: {} rows of stride {}, {} columns (offsets {}; lengths {}; chunks {}; physical {} step {})",
            self.first,
            self.rows,
            self.stride,
            self.columns(),
            show(&self.offsets),
            show(&self.lengths),
            show(&self.chunks),
            show(&self.phys),
            show(&self.phys_steps)
        )
    }
}

fn show(s: &PatternSeq) -> String {
    s.pieces()
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where everything that is not a tile lives.
#[derive(Clone, Debug)]
enum Rest {
    Map(PatternMap),
    Table(ExtentTable),
}

impl Rest {
    fn lookup(&self, x: u64) -> Lookup {
        match self {
            Rest::Map(m) => m.lookup(x),
            Rest::Table(t) => t.lookup(x),
        }
    }
}

/// The merged index of a container.
#[derive(Clone, Debug)]
pub struct GlobalIndex {
    tiles: Vec<Tile>,
    rest: Rest,
    /// Logical size: the end of the last write, or the last truncation's size.
    size: u64,
}

/// Counts for `patio container stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Tiles plus pattern entries of the rest (global patterns).
    pub global_patterns: u64,
    /// Entries of the rest (pattern entries and literal runs, or table rows).
    pub rest_entries: u64,
    pub tiles: u64,
    /// Writes expanded one by one (overlaps, irregular writes, raw mode).
    pub loose_writes: u64,
    pub mem_bytes: usize,
}

impl GlobalIndex {
    /// Merges per-writer segments and loose writes. `patterns` false builds the raw
    /// (extent table) index from loose writes only.
    pub fn build(
        segments: Vec<Segment>,
        mut loose: Vec<Loose>,
        truncations: &[Truncation],
        patterns: bool,
        detector: &Detector,
    ) -> patio_core::Result<(Self, IndexStats)> {
        // A write is cut at the smallest size of any truncation keyed after it.
        let mut cut_after = vec![u64::MAX; truncations.len() + 1];
        for i in (0..truncations.len()).rev() {
            cut_after[i] = cut_after[i + 1].min(truncations[i].size);
        }
        let cut = |key: u64| cut_after[truncations.partition_point(|t| t.key < key)];
        let mut size = 0u64;
        let last_trunc = truncations.last();
        if let Some(t) = last_trunc {
            size = t.size;
        }
        let newer = |key: u64| last_trunc.is_none_or(|t| key > t.key);

        let mut kept: Vec<Segment> = Vec::with_capacity(segments.len());
        for s in segments {
            if newer(s.max_key()) {
                size = size.max(s.end());
            }
            if cut(s.min_key()) < s.end() {
                loose.extend(s.expand());
            } else {
                kept.push(s);
            }
        }
        loose.retain_mut(|l| {
            let limit = cut(l.order.key);
            if newer(l.order.key) {
                size = size.max(l.extent.end());
            }
            if l.extent.end() > limit {
                l.extent.length = limit.saturating_sub(l.extent.logical);
            }
            l.extent.length > 0
        });

        // Clusters of segments: sort their spans by start and sweep.
        let mut spans: Vec<(u64, u64, usize)> = kept
            .iter()
            .enumerate()
            .map(|(i, s)| (s.first, s.end(), i))
            .collect();
        spans.sort_unstable_by_key(|&(start, end, _)| (start, end));
        let mut tiles: Vec<(Tile, Vec<usize>)> = Vec::new();
        let mut demoted: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < spans.len() {
            let mut end = spans[i].1;
            let mut j = i + 1;
            while j < spans.len() && spans[j].0 < end {
                end = end.max(spans[j].1);
                j += 1;
            }
            let segs: Vec<usize> = spans[i..j].iter().map(|m| m.2).collect();
            let refs: Vec<&Segment> = segs.iter().map(|&s| &kept[s]).collect();
            match Tile::build(&refs, detector) {
                Some(tile) => tiles.push((tile, segs)),
                None => demoted.extend(segs),
            }
            i = j;
        }
        drop(spans);
        // A loose write may sit in a tile's holes (lookups there fall through to the
        // rest); one that shares a byte with a tile takes the tile's writes into the rest,
        // where write order decides.
        let mut shares_bytes = vec![false; tiles.len()];
        for l in &loose {
            let (a, b) = (l.extent.logical, l.extent.end());
            let from = tiles.partition_point(|(t, _)| t.end <= a);
            for (k, (t, _)) in tiles.iter().enumerate().skip(from) {
                if t.first >= b {
                    break;
                }
                shares_bytes[k] |= t.overlaps(a, b);
            }
        }
        let mut tiles: Vec<Tile> = tiles
            .into_iter()
            .zip(shares_bytes)
            .filter_map(|((tile, segs), shared)| {
                if shared {
                    demoted.extend(segs);
                    None
                } else {
                    Some(tile)
                }
            })
            .collect();
        for s in demoted {
            loose.extend(kept[s].expand());
        }
        drop(kept);
        let loose_writes = loose.len() as u64;
        let extents = ordered_extents(loose);
        let rest = if patterns {
            Rest::Map(PatternMap::build(&extents, detector)?)
        } else {
            Rest::Table(ExtentTable::build(&extents))
        };
        drop(extents);
        tiles.sort_unstable_by_key(|t| t.first);
        let index = GlobalIndex { tiles, rest, size };
        let (rest_entries, rest_patterns) = match &index.rest {
            Rest::Map(m) => {
                let s = m.stats();
                (s.entries as u64, s.pattern_entries as u64)
            }
            Rest::Table(t) => (t.len() as u64, 0),
        };
        let stats = IndexStats {
            global_patterns: index.tiles.len() as u64 + rest_patterns,
            rest_entries,
            tiles: index.tiles.len() as u64,
            loose_writes,
            mem_bytes: index.mem_bytes(),
        };
        Ok((index, stats))
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// What is at logical offset `x` (holes and unmapped ranges as in patio-core;
    /// the caller applies the file size).
    pub fn lookup(&self, x: u64) -> Lookup {
        let i = self.tiles.partition_point(|t| t.first <= x);
        if i > 0 && x < self.tiles[i - 1].end {
            // In a tile's hole the rest may hold a write; none shares a tile's bytes.
            return match (self.tiles[i - 1].lookup(x), self.rest.lookup(x)) {
                (Lookup::Hole { len }, Lookup::Hole { len: rest }) => {
                    Lookup::Hole { len: len.min(rest) }
                }
                (Lookup::Hole { len }, Lookup::Unmapped) => Lookup::Hole { len },
                (Lookup::Hole { .. }, data) => data,
                (data, _) => data,
            };
        }
        let next_tile = self.tiles.get(i).map(|t| t.first);
        match (self.rest.lookup(x), next_tile) {
            (Lookup::Hole { len }, Some(n)) => Lookup::Hole {
                len: len.min(n - x),
            },
            (Lookup::Unmapped, Some(n)) => Lookup::Hole { len: n - x },
            (other, _) => other,
        }
    }

    /// Bytes the index holds in memory.
    pub fn mem_bytes(&self) -> usize {
        let rest = match &self.rest {
            Rest::Map(m) => m.mem_bytes(),
            Rest::Table(t) => t.mem_bytes(),
        };
        std::mem::size_of::<Self>() + self.tiles.iter().map(Tile::mem_bytes).sum::<usize>() + rest
    }

    /// Every mapped extent in logical order (expansion; for flatten and checks).
    pub fn extents(&self) -> Vec<Extent> {
        let mut out: Vec<Extent> = self.tiles.iter().flat_map(|t| t.extents()).collect();
        match &self.rest {
            Rest::Map(m) => out.extend(m.extents()),
            Rest::Table(t) => out.extend_from_slice(t.extents()),
        }
        out.sort_unstable_by_key(|e| e.logical);
        out
    }

    /// One line per tile and per pattern entry of the rest.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.tiles.iter().map(Tile::describe).collect();
        if let Rest::Map(m) = &self.rest {
            lines.extend(m.describe());
        }
        lines
    }
}

/// Loose writes as extents in an order `PatternMap::build` / `ExtentTable::build`
/// resolve correctly: sorted by logical offset when no two overlap (the common
/// case, which the builders then take in one pass), else in write order.
fn ordered_extents(mut loose: Vec<Loose>) -> Vec<Extent> {
    loose.sort_unstable_by_key(|l| (l.extent.logical, l.order));
    let disjoint = loose
        .windows(2)
        .all(|w| w[0].extent.end() <= w[1].extent.logical);
    if !disjoint {
        loose.sort_unstable_by_key(|l| l.order);
    }
    loose.into_iter().map(|l| l.extent).collect()
}
