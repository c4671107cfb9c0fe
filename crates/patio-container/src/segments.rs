//! From one writer's records to what the global merge works on: *segments* (runs of
//! writes with one logical stride, one length and one physical step — a local
//! strided pattern) and *loose* entries (everything else, one per write).
//!
//! Segments are found on the pattern columns without expanding them, and a segment
//! continued by the next record (a flush in the middle of a strided loop) is joined
//! to it, so flush timing does not change what the global merge sees.

use crate::record::{Columns, IndexEntry, Record};
use patio_core::{Extent, PatternSeq, Piece};

/// What decides which of two overlapping writes wins: the record key (flush time),
/// then the writer's chunk number, then the write's position in that writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Order {
    pub key: u64,
    pub chunk: u32,
    pub pos: u64,
}

/// One write that the merge handles entry by entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loose {
    pub extent: Extent,
    pub order: Order,
}

/// `count` writes of `length` bytes at `first + i·stride`, stored at
/// `phys + i·phys_step` of one writer's data log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub chunk: u32,
    pub first: u64,
    pub stride: u64,
    pub count: u64,
    pub length: u64,
    pub phys: u64,
    pub phys_step: u64,
    /// Position in the writer of the first write.
    pub pos: u64,
    /// `(index in the segment, key)` where each record's part begins.
    pub keys: Vec<(u64, u64)>,
}

impl Segment {
    /// One past the last byte of the last write.
    pub fn end(&self) -> u64 {
        self.first + (self.count - 1) * self.stride + self.length
    }

    pub fn min_key(&self) -> u64 {
        self.keys[0].1
    }

    pub fn max_key(&self) -> u64 {
        self.keys.last().expect("segments have a key").1
    }

    fn key_of(&self, i: u64) -> u64 {
        let at = self.keys.partition_point(|&(start, _)| start <= i) - 1;
        self.keys[at].1
    }

    /// The segment's writes, one by one.
    pub fn expand(&self) -> impl Iterator<Item = Loose> + '_ {
        (0..self.count).map(move |i| Loose {
            extent: Extent::new(
                self.first + i * self.stride,
                self.length,
                self.phys + i * self.phys_step,
                self.chunk as u64,
            ),
            order: Order {
                key: self.key_of(i),
                chunk: self.chunk,
                pos: self.pos + i,
            },
        })
    }

    /// The first `self.length` bytes of `single` (one write) as a write of their own,
    /// when they are this strided segment's next write and `single` is longer.
    fn head_of(&self, single: &Segment) -> Option<Segment> {
        let continues = self.count > 1
            && single.count == 1
            && single.chunk == self.chunk
            && single.length > self.length
            && self.pos + self.count == single.pos
            && self.first + self.count * self.stride == single.first
            && self.phys + self.count * self.phys_step == single.phys;
        continues.then(|| Segment {
            length: self.length,
            ..single.clone()
        })
    }

    /// Joins `next` when it continues this segment's pattern. A one-write segment
    /// takes its stride and physical step from `next`.
    fn absorb(&mut self, next: &Segment) -> bool {
        if self.chunk != next.chunk
            || self.length != next.length
            || self.pos + self.count != next.pos
        {
            return false;
        }
        if self.count == 1 {
            let (Some(stride), Some(step)) = (
                next.first.checked_sub(self.first),
                next.phys.checked_sub(self.phys),
            ) else {
                return false;
            };
            let fits = stride >= self.length.max(1)
                && (next.count == 1 || (next.stride == stride && next.phys_step == step));
            if !fits {
                return false;
            }
            self.stride = stride;
            self.phys_step = step;
        } else {
            let continues = (next.count == 1
                || (self.stride == next.stride && self.phys_step == next.phys_step))
                && self.first + self.count * self.stride == next.first
                && self.phys + self.count * self.phys_step == next.phys;
            if !continues {
                return false;
            }
        }
        for &(start, key) in &next.keys {
            if self.max_key() != key {
                self.keys.push((self.count + start, key));
            }
        }
        self.count += next.count;
        true
    }
}

/// Appends `seg` to the writer's segments, joining the last one when it continues it.
/// A single write that continues the last segment but is longer — two writes the
/// writer merged because they touched, such as the last row of one tile and the first
/// of the next — is split: its first `length` bytes join the segment, the rest stays
/// a write of its own (with the same position) that the next segment may join.
fn push(segments: &mut Vec<Segment>, mut seg: Segment) {
    if let Some(prev) = segments.last_mut() {
        if prev.absorb(&seg) {
            return;
        }
        if let Some(head) = prev.head_of(&seg) {
            let taken = head.length;
            prev.absorb(&head);
            seg.first += taken;
            seg.length -= taken;
            seg.phys += taken;
        }
    }
    segments.push(seg);
}

/// Splits one writer's records into segments and loose writes. With `patterns`
/// false (raw-mode containers) every write is loose.
pub fn split_writer<R: std::borrow::Borrow<Record>>(
    chunk: u32,
    records: &[R],
    patterns: bool,
) -> (Vec<Segment>, Vec<Loose>) {
    let mut segments: Vec<Segment> = Vec::new();
    let mut loose = Vec::new();
    let mut pos = 0u64;
    let single = |e: IndexEntry, pos: u64, key: u64| Segment {
        chunk,
        first: e.logical,
        stride: 0,
        count: 1,
        length: e.length,
        phys: e.physical,
        phys_step: 0,
        pos,
        keys: vec![(0, key)],
    };
    for record in records {
        let record = record.borrow();
        let n = record.columns.len();
        match &record.columns {
            Columns::Pattern {
                logical,
                lengths,
                physical,
            } if patterns => {
                let mut at = 0u64;
                let mut lengths = Cursor::new(lengths);
                let mut physical = Cursor::new(physical);
                for piece in logical.pieces() {
                    let len = piece.len();
                    for (run_at, first, stride, count) in one_stride_runs(piece) {
                        let run_at = at + run_at;
                        let found = (count > 1)
                            .then(|| {
                                strided_run(stride, &mut lengths, &mut physical, run_at, count)
                            })
                            .flatten();
                        match found {
                            Some((length, phys, phys_step)) => push(
                                &mut segments,
                                Segment {
                                    chunk,
                                    first,
                                    stride: stride as u64,
                                    count,
                                    length,
                                    phys,
                                    phys_step,
                                    pos: pos + run_at,
                                    keys: vec![(0, record.key)],
                                },
                            ),
                            None => {
                                for i in run_at..run_at + count {
                                    let e = record.columns.get(i);
                                    push(&mut segments, single(e, pos + i, record.key));
                                }
                            }
                        }
                    }
                    at += len;
                }
            }
            _ if patterns => {
                for i in 0..n {
                    let e = record.columns.get(i);
                    push(&mut segments, single(e, pos + i, record.key));
                }
            }
            _ => {
                for i in 0..n {
                    let e = record.columns.get(i);
                    loose.push(Loose {
                        extent: Extent::new(e.logical, e.length, e.physical, chunk as u64),
                        order: Order {
                            key: record.key,
                            chunk,
                            pos: pos + i,
                        },
                    });
                }
            }
        }
        pos += n;
    }
    // Writes that joined no run are merged one by one.
    segments.retain(|s| {
        if s.count > 1 && patterns {
            return true;
        }
        loose.extend(s.expand());
        false
    });
    (segments, loose)
}

/// A logical piece as runs of one stride, in write order: `(position in the piece,
/// first offset, stride, count)`. A nested pattern (a tile: rows of a stride, the rows
/// placed by an outer pattern) gives one run per innermost row, found on the pattern
/// without expanding it; anything else gives one run per write (stride 0, count 1).
fn one_stride_runs(piece: &Piece) -> Vec<(u64, u64, i64, u64)> {
    let len = piece.len();
    if let Piece::Node(node) = piece {
        let most = usize::try_from(len / 2).unwrap_or(usize::MAX).max(1);
        if let Some(runs) = node.body.flat_runs(most) {
            return runs
                .into_iter()
                .map(|(at, off, stride, count)| {
                    (at, (node.init as i128 + off) as u64, stride, count)
                })
                .collect();
        }
    }
    (0..len).map(|i| (i, piece.get(i) as u64, 0, 1)).collect()
}

/// When the writes at `at .. at+count` of a run with a positive `stride` do not
/// overlap and their length and physical columns are arithmetic there:
/// `(length, first physical, physical step)`.
fn strided_run(
    stride: i64,
    lengths: &mut Cursor,
    physical: &mut Cursor,
    at: u64,
    count: u64,
) -> Option<(u64, u64, u64)> {
    let (length, 0) = lengths.arithmetic(at, count)? else {
        return None;
    };
    let (phys, step) = physical.arithmetic(at, count)?;
    (stride > 0 && length >= 0 && length as u64 <= stride as u64 && step >= 0).then_some((
        length as u64,
        phys as u64,
        step as u64,
    ))
}

/// Walks a column's pieces forward, for queries at increasing positions.
struct Cursor<'a> {
    pieces: &'a [Piece],
    piece: usize,
    start: u64,
}

impl<'a> Cursor<'a> {
    fn new(seq: &'a PatternSeq) -> Self {
        Cursor {
            pieces: seq.pieces(),
            piece: 0,
            start: 0,
        }
    }

    /// `(first, step)` when `column[at .. at+len]` is arithmetic and lies inside one
    /// piece. Positions must not decrease from call to call.
    fn arithmetic(&mut self, at: u64, len: u64) -> Option<(i64, i64)> {
        while self.piece < self.pieces.len() && at >= self.start + self.pieces[self.piece].len() {
            self.start += self.pieces[self.piece].len();
            self.piece += 1;
        }
        let piece = self.pieces.get(self.piece)?;
        if at < self.start || at + len > self.start + piece.len() {
            return None;
        }
        let i = at - self.start;
        let first = piece.get(i);
        if len == 1 {
            return Some((first, 0));
        }
        let step = piece.get(i + 1).checked_sub(first)?;
        match piece {
            Piece::Node(n) => {
                let (start, run) = n.body.inner_run(i)?;
                (i + len <= start + run).then_some((first, step))
            }
            Piece::Literal(v) => {
                let run = &v[i as usize..(i + len) as usize];
                run.windows(2)
                    .all(|w| w[1].checked_sub(w[0]) == Some(step))
                    .then_some((first, step))
            }
        }
    }
}
