//! The stream-set file format (`PSET`): the offsets and lengths of every stream of a
//! trace, compact and open to random access. What `patio analyze` reports as
//! `encoded_bytes`, what `patio query` answers from, and the request part of a native
//! trace.
//!
//! * Streams that repeat an earlier stream request for request (POSIX under MPI-IO)
//!   are stored once: a source column says which earlier stream each one copies.
//! * The requests of the stored streams, in order, are cut into *blocks* of at most
//!   64 KiB of record bytes and [`MAX_BLOCK_REQUESTS`] requests; a long stream spans
//!   several blocks, short streams share one.
//! * Each block is written in the smallest of three forms — patterns (`streamset.rs`:
//!   skeletons, parameters, byte-aligned literals), units (`unitform.rs`: every piece
//!   one pattern, a few bytes each) or records (`records.rs`) — and entropy-coded on
//!   its own (`entropy.rs`).
//! * A checksummed index (`setindex.rs`) holds the source column, each stored
//!   stream's request count and, for a set of several blocks, the block table.
//! * A set whose stored requests fit one block (at most [`MAX_BLOCK_REQUESTS`], and
//!   64 KiB with the index in the smaller form) is one block: index and block coded
//!   together, no table. Otherwise the requests are cut into blocks of one count.
//!
//! Reaching request `i` of a stream decodes one block; a stream's requests decode the
//! blocks the stream spans (one when it fits); the requests touching an offset decode
//! only the stream's blocks whose offset range holds it (when a stream spans several
//! blocks, the table gives their ranges). Inside a block, a query rebuilds only the
//! stream it asks for. Layout: docs/FORMATS.md, "Stream set".

use crate::codec::Cursor;
use crate::detect::Detector;
use crate::entropy::{self, Effort, MAX_BLOCK};
use crate::error::{CoreError, Result};
use crate::records;
use crate::setindex::{self, Columns, Index, Written};
use crate::streamset::{self, decode_streams_into, encode_streams};
use crate::unitform;
use std::collections::HashMap;

pub use crate::setindex::{BlockEntry, MAX_BLOCK_REQUESTS, MAX_STREAMS, VERSION};

const KIND_RECORDS: u8 = 0;
const KIND_PATTERNS: u8 = 1;
/// Every piece one pattern (version 3).
const KIND_UNITS: u8 = 2;

/// Which parts of the encoding are used; every combination decodes with the same
/// reader. All on by default; the others exist to measure what each part earns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Store repeated streams once.
    pub dedup: bool,
    /// Offer the pattern and unit forms of each block.
    pub patterns: bool,
    /// Offer the record form of each block.
    pub records: bool,
    /// Bit-packed literal runs in the pattern form (instead of byte-aligned varints).
    pub packed_literals: bool,
    /// Entropy coding of blocks and header.
    pub effort: Effort,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dedup: true,
            patterns: true,
            records: true,
            packed_literals: false,
            effort: Effort::Best,
        }
    }
}

impl Options {
    /// The default with one part turned off in turn, named: what an ablation measures.
    pub fn ablations() -> Vec<(&'static str, Options)> {
        let d = Options::default();
        vec![
            ("no dedup", Options { dedup: false, ..d }),
            (
                "no patterns",
                Options {
                    patterns: false,
                    ..d
                },
            ),
            (
                "no records",
                Options {
                    records: false,
                    ..d
                },
            ),
            (
                "packed literals",
                Options {
                    packed_literals: true,
                    ..d
                },
            ),
            (
                "no entropy coding",
                Options {
                    effort: Effort::Stored,
                    ..d
                },
            ),
        ]
    }
}

/// A contiguous run of one stored stream's requests inside a block.
struct Piece {
    stored: usize,
    start: usize,
    end: usize,
}

/// Room a block's records need beyond their counted sizes: the form byte, and a first
/// request inside a stream whose gap is written against 0 (up to 9 bytes more).
const BLOCK_SLACK: usize = 10;

/// Encodes the `(offsets, lengths)` of every stream, in order.
pub fn encode(streams: &[(&[u64], &[u64])], detector: &Detector, opts: &Options) -> Vec<u8> {
    encode_observed(streams, detector, opts, &mut |_, _| {})
}

/// [`encode`], calling `progress(done, total)` as blocks are coded: the requests coded
/// so far of the `total` this pass codes (fewer than all when copies are stored once; a
/// second pass without copies, when it is tried, starts again from 0 of all).
pub fn encode_observed(
    streams: &[(&[u64], &[u64])],
    detector: &Detector,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Vec<u8> {
    let set = encode_with(streams, detector, opts, progress);
    // Copies stored once cost their source column; where the copies and their
    // originals share a block, its entropy coder may repeat them for less: the
    // smaller of the two.
    if opts.dedup && set.copies {
        let plain = encode_with(
            streams,
            detector,
            &Options {
                dedup: false,
                ..*opts
            },
            progress,
        );
        if plain.bytes.len() < set.bytes.len() {
            return plain.bytes;
        }
    }
    set.bytes
}

/// A set as written, and whether it stores some stream as a copy of another.
struct Encoded {
    bytes: Vec<u8>,
    copies: bool,
}

fn encode_with(
    streams: &[(&[u64], &[u64])],
    detector: &Detector,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Encoded {
    let mut first_copy: HashMap<(&[u64], &[u64]), usize> = HashMap::new();
    let mut source = Vec::with_capacity(streams.len());
    let mut stored: Vec<usize> = Vec::new();
    for (k, &(o, l)) in streams.iter().enumerate() {
        assert_eq!(o.len(), l.len(), "offset and length columns differ");
        match first_copy.get(&(o, l)) {
            Some(&j) if opts.dedup => source.push((k - j) as i64),
            _ => {
                first_copy.entry((o, l)).or_insert(k);
                source.push(0);
                stored.push(k);
            }
        }
    }
    let counts: Vec<i64> = stored.iter().map(|&k| streams[k].0.len() as i64).collect();
    let columns = Columns {
        source: &source,
        counts: &counts,
    };
    let views = |pieces: &[Piece]| -> Vec<(&[u64], &[u64])> {
        pieces
            .iter()
            .map(|p| {
                let (o, l) = streams[stored[p.stored]];
                (&o[p.start..p.end], &l[p.start..p.end])
            })
            .collect()
    };
    let total: usize = counts.iter().map(|&n| n as usize).sum();
    progress(0, total as u64);

    // Small sets are one block: the index and the block coded together, no table.
    if total <= MAX_BLOCK_REQUESTS {
        let whole: Vec<Piece> = (0..stored.len())
            .filter(|&s| !streams[stored[s]].0.is_empty())
            .map(|s| Piece {
                stored: s,
                start: 0,
                end: streams[stored[s]].0.len(),
            })
            .collect();
        let forms = match total {
            0 => vec![Vec::new()],
            _ => block_forms(&views(&whole), detector, opts, false),
        };
        if let Some(bytes) = setindex::write_one_block(&columns, &forms, detector, opts.effort) {
            progress(total as u64, total as u64);
            return Encoded {
                bytes,
                copies: stored.len() < streams.len(),
            };
        }
    }

    // Otherwise blocks of one request count, each of whose records fit a block.
    let sizes: Vec<usize> = stored
        .iter()
        .flat_map(|&k| records::sizes(streams[k].0, streams[k].1))
        .collect();
    let per_block = requests_per_block(&sizes);
    let mut blocks: Vec<Vec<Piece>> = Vec::new();
    let mut at = 0usize;
    for (s, &k) in stored.iter().enumerate() {
        let n = streams[k].0.len();
        let mut start = 0;
        while start < n {
            if at.is_multiple_of(per_block) {
                blocks.push(Vec::new());
            }
            let end = n.min(start + per_block - at % per_block);
            blocks.last_mut().expect("a block").push(Piece {
                stored: s,
                start,
                end,
            });
            at += end - start;
            start = end;
        }
    }
    // Offset ranges pay off when a stream spans blocks (they skip its other blocks).
    let ranges = blocks
        .iter()
        .any(|b| b.first().is_some_and(|p| p.start > 0));
    let mut done = 0u64;
    let written: Vec<Written> = blocks
        .iter()
        .map(|pieces| {
            let v = views(pieces);
            let forms = block_forms(&v, detector, opts, true);
            let views: Vec<&[u8]> = forms.iter().map(Vec::as_slice).collect();
            let (_, packed) =
                entropy::pack_smallest(&views, opts.effort).expect("at least the record form");
            let lo = v.iter().flat_map(|v| v.0).copied().min().unwrap_or(0);
            let hi = v
                .iter()
                .flat_map(|v| v.0.iter().zip(v.1).map(|(&o, &l)| last_byte(o, l)))
                .max()
                .unwrap_or(0);
            done += pieces.iter().map(|p| (p.end - p.start) as u64).sum::<u64>();
            progress(done, total as u64);
            Written { packed, lo, hi }
        })
        .collect();
    Encoded {
        bytes: setindex::write_blocks(&columns, per_block, &written, ranges, detector, opts.effort),
        copies: stored.len() < streams.len(),
    }
}

/// The most requests per block such that any run of that many stored requests fits a
/// block in record form (`sizes`: each request's record bytes).
fn requests_per_block(sizes: &[usize]) -> usize {
    let fits = |n: usize| {
        let mut window: usize = sizes.iter().take(n).sum();
        let mut worst = window;
        for i in n..sizes.len() {
            window = window + sizes[i] - sizes[i - n];
            worst = worst.max(window);
        }
        worst + BLOCK_SLACK <= MAX_BLOCK
    };
    // A record takes at most 20 bytes: a block always holds this many.
    let (mut lo, mut hi) = ((MAX_BLOCK - BLOCK_SLACK) / 20, MAX_BLOCK_REQUESTS);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// The last byte a request touches, saturated at `u64::MAX` (its offset when empty:
/// a block's range may only be wider than its requests).
fn last_byte(offset: u64, length: u64) -> u64 {
    offset.saturating_add(length.max(1) - 1)
}

/// The raw forms of one block that `opts` offers and that fit a block: units (when
/// every piece is one pattern), patterns, records. With `must_fit`, the record form
/// is offered whenever no other form is (the caller made it fit).
fn block_forms(
    views: &[(&[u64], &[u64])],
    detector: &Detector,
    opts: &Options,
    must_fit: bool,
) -> Vec<Vec<u8>> {
    let mut forms = Vec::new();
    if opts.patterns {
        if let Some(units) = unitform::encode(views) {
            let mut raw = vec![KIND_UNITS];
            raw.extend(units);
            if raw.len() <= MAX_BLOCK {
                forms.push(raw);
            }
        }
        let mut raw = vec![KIND_PATTERNS];
        raw.extend(encode_streams(views, detector, !opts.packed_literals));
        if raw.len() <= MAX_BLOCK {
            forms.push(raw);
        }
    }
    if opts.records || (must_fit && forms.is_empty()) {
        let mut raw = vec![KIND_RECORDS];
        for (o, l) in views {
            records::put(o, l, &mut raw);
        }
        if raw.len() <= MAX_BLOCK {
            forms.push(raw);
        }
    }
    forms
}

/// Requests answering a query and the number of blocks decoded for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub requests: Vec<(u64, u64)>,
    pub blocks_decoded: usize,
}

/// An opened stream set: the index read, no block decoded yet (a one-block set has
/// decoded its unit).
pub struct StreamSet<'a> {
    index: Index<'a>,
}

impl<'a> StreamSet<'a> {
    /// Checks the head and reads the index; `bytes` is the whole set (either version).
    pub fn open(bytes: &'a [u8]) -> Result<Self> {
        Ok(StreamSet {
            index: setindex::read(bytes)?,
        })
    }

    /// The set's format version.
    pub fn version(&self) -> u8 {
        self.index.version
    }

    pub fn streams(&self) -> usize {
        self.index.stored_of.len()
    }

    pub fn blocks(&self) -> &[BlockEntry] {
        &self.index.blocks
    }

    /// Requests of stream `k`.
    pub fn stream_len(&self, k: usize) -> Result<u64> {
        Ok(self.index.counts[self.stored(k)?])
    }

    fn stored(&self, k: usize) -> Result<usize> {
        self.index.stored_of.get(k).copied().ok_or_else(|| {
            CoreError::Invalid(format!(
                "no stream {k}: the set holds {} streams",
                self.index.stored_of.len()
            ))
        })
    }

    /// The blocks holding stored requests `[from, to)`.
    fn blocks_between(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let blocks = &self.index.blocks;
        let first = blocks.partition_point(|b| b.first + b.requests <= from);
        let last = blocks.partition_point(|b| b.first < to);
        first..last.max(first)
    }

    /// Block `b`'s raw bytes (its form byte first), checked and decoded.
    pub fn raw_block(&self, b: usize) -> Result<std::borrow::Cow<'_, [u8]>> {
        self.index.blocks[b].raw(&self.index.bytes, self.index.base)
    }

    /// Decodes block `b`: its requests in order.
    pub fn decode_block(&self, b: usize) -> Result<Vec<(u64, u64)>> {
        let (mut o, mut l) = (Vec::new(), Vec::new());
        self.decode_block_into(b, None, &mut o, &mut l)?;
        Ok(o.into_iter().zip(l).collect())
    }

    /// Decodes block `b`, appending its requests' offsets and lengths (stored streams
    /// in order) to `offsets` and `lengths` — only stored stream `only`'s when given
    /// (the other streams' pieces are parsed, not rebuilt).
    fn decode_block_into(
        &self,
        b: usize,
        only: Option<usize>,
        offsets: &mut Vec<u64>,
        lengths: &mut Vec<u64>,
    ) -> Result<()> {
        let (e, ix) = (&self.index.blocks[b], &self.index);
        let at = ix.base + e.at;
        let raw = self.raw_block(b)?;
        // The pieces: runs of one stored stream inside the block, and which is wanted.
        let mut pieces = Vec::new();
        let mut want = None;
        let (mut pos, end) = (e.first, e.first + e.requests);
        while pos < end {
            let s = ix.starts.partition_point(|&st| st <= pos) - 1;
            let stop = (ix.starts[s] + ix.counts[s]).min(end);
            if stop > pos {
                if only == Some(s) {
                    want = Some(pieces.len());
                }
                pieces.push((stop - pos) as usize);
            }
            pos = stop;
        }
        if only.is_some() && want.is_none() {
            return Ok(());
        }
        let from = offsets.len();
        let mut c = Cursor::with_base(&raw, at);
        match c.u8()? {
            KIND_RECORDS => {
                offsets.reserve(e.requests as usize);
                lengths.reserve(e.requests as usize);
                for &n in &pieces {
                    records::get_into(&mut c, n, offsets, lengths)?;
                }
                if !c.is_at_end() {
                    return Err(c.error("trailing bytes after the block's records"));
                }
                if let Some(w) = want {
                    // Records are read in order: keep the wanted piece's.
                    let skip = from + pieces[..w].iter().sum::<usize>();
                    for v in [&mut *offsets, &mut *lengths] {
                        v.truncate(skip + pieces[w]);
                        v.drain(from..skip);
                    }
                }
            }
            KIND_PATTERNS => {
                let columns = match ix.version {
                    1 => streamset::Columns::Sequences,
                    _ => streamset::Columns::Counted,
                };
                let counts = decode_streams_into(
                    &raw[1..],
                    pieces.len() as u64,
                    e.requests,
                    at,
                    columns,
                    want,
                    offsets,
                    lengths,
                )?;
                let expected = match want {
                    Some(w) => vec![pieces[w]],
                    None => pieces,
                };
                if counts != expected {
                    return Err(CoreError::corrupt(
                        at,
                        format!("block {b} holds streams of other lengths than its index says"),
                    ));
                }
            }
            KIND_UNITS if ix.version >= VERSION => {
                unitform::decode_into(&mut c, &pieces, want, offsets, lengths)?;
            }
            kind => return Err(CoreError::corrupt(at, format!("unknown block form {kind}"))),
        }
        Ok(())
    }

    /// Requests `[from, to)` of stream `k` (positions inside the stream), decoding the
    /// blocks that hold them and for which `keep` is true.
    fn range(
        &self,
        k: usize,
        from: u64,
        to: u64,
        keep: impl Fn(&BlockEntry) -> bool,
    ) -> Result<Answer> {
        let s = self.stored(k)?;
        let start = self.index.starts[s];
        let (lo, hi) = (start + from, start + to);
        let mut answer = Answer {
            requests: Vec::new(),
            blocks_decoded: 0,
        };
        let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
        for b in self.blocks_between(lo, hi) {
            let e = &self.index.blocks[b];
            if !keep(e) {
                continue;
            }
            offsets.clear();
            lengths.clear();
            self.decode_block_into(b, Some(s), &mut offsets, &mut lengths)?;
            answer.blocks_decoded += 1;
            // The block gave the stream's piece, which starts at `piece`.
            let piece = start.max(e.first);
            let a = (lo.max(e.first) - piece) as usize;
            let z = (hi.min(e.first + e.requests) - piece) as usize;
            if z > offsets.len() {
                return Err(CoreError::corrupt(
                    self.index.base + e.at,
                    format!("block {b} holds fewer of stream {k}'s requests than its index says"),
                ));
            }
            answer.requests.extend(
                offsets[a..z]
                    .iter()
                    .copied()
                    .zip(lengths[a..z].iter().copied()),
            );
        }
        Ok(answer)
    }

    /// Every request of stream `k`, in order.
    pub fn stream(&self, k: usize) -> Result<Answer> {
        let n = self.stream_len(k)?;
        self.range(k, 0, n, |_| true)
    }

    /// Request `i` of stream `k` (one block decoded).
    pub fn request(&self, k: usize, i: u64) -> Result<Answer> {
        let n = self.stream_len(k)?;
        if i >= n {
            return Err(CoreError::Invalid(format!(
                "stream {k} has {n} requests, no request {i}"
            )));
        }
        self.range(k, i, i + 1, |_| true)
    }

    /// The requests of stream `k` that touch byte `x` (`offset <= x < offset + length`),
    /// in order, decoding only blocks whose offset range holds `x`.
    pub fn touching(&self, k: usize, x: u64) -> Result<Answer> {
        let n = self.stream_len(k)?;
        let mut a = self.range(k, 0, n, |e| e.lo <= x && x <= e.hi)?;
        a.requests.retain(|&(o, l)| o <= x && x - o < l);
        Ok(a)
    }

    /// Every stream, decoded into one offset and one length array (streams one
    /// after the other, copies written out): no allocation per stream.
    pub fn decode_flat(&self) -> Result<Decoded> {
        let ix = &self.index;
        let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
        for b in 0..ix.blocks.len() {
            self.decode_block_into(b, None, &mut offsets, &mut lengths)?;
        }
        let copies = ix.stored_of.iter().enumerate().any(|(k, &s)| k != s);
        let mut bounds = Vec::with_capacity(ix.stored_of.len() + 1);
        bounds.push(0);
        if !copies {
            // Every stream stored in order: the stored requests are the answer.
            bounds.extend(
                ix.starts
                    .iter()
                    .zip(&ix.counts)
                    .map(|(s, n)| (s + n) as usize),
            );
            return Ok(Decoded {
                offsets,
                lengths,
                bounds,
            });
        }
        let total = ix.stored_of.iter().map(|&s| ix.counts[s] as usize).sum();
        let (mut all_offsets, mut all_lengths) =
            (Vec::with_capacity(total), Vec::with_capacity(total));
        for &s in &ix.stored_of {
            let range = ix.starts[s] as usize..(ix.starts[s] + ix.counts[s]) as usize;
            all_offsets.extend_from_slice(&offsets[range.clone()]);
            all_lengths.extend_from_slice(&lengths[range]);
            bounds.push(all_offsets.len());
        }
        Ok(Decoded {
            offsets: all_offsets,
            lengths: all_lengths,
            bounds,
        })
    }

    /// Every stream, decoded, one pair of vectors per stream.
    pub fn decode_all(&self) -> Result<Vec<(Vec<u64>, Vec<u64>)>> {
        Ok(self.decode_flat()?.into_streams())
    }
}

/// Every stream of a set: offsets and lengths of stream after stream in two arrays,
/// and where each stream ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub offsets: Vec<u64>,
    pub lengths: Vec<u64>,
    /// `bounds[k]..bounds[k + 1]` are stream `k`'s requests.
    pub bounds: Vec<usize>,
}

impl Decoded {
    /// Number of streams.
    pub fn streams(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Stream `k`'s offsets and lengths.
    pub fn stream(&self, k: usize) -> (&[u64], &[u64]) {
        let r = self.bounds[k]..self.bounds[k + 1];
        (&self.offsets[r.clone()], &self.lengths[r])
    }

    /// One pair of vectors per stream.
    pub fn into_streams(self) -> Vec<(Vec<u64>, Vec<u64>)> {
        (0..self.streams())
            .map(|k| {
                let (o, l) = self.stream(k);
                (o.to_vec(), l.to_vec())
            })
            .collect()
    }
}

/// Decodes a whole set written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Vec<(Vec<u64>, Vec<u64>)>> {
    StreamSet::open(bytes)?.decode_all()
}
