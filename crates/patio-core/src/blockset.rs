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
//! * Each block is written in the smaller of two forms — patterns (`streamset.rs`:
//!   skeletons, parameters, byte-aligned literals) or records (`records.rs`) — and
//!   entropy-coded on its own (`entropy.rs`).
//! * A checksummed header holds the source column, each stored stream's request count
//!   and the block index (requests, sizes, codec, checksum, offset range per block).
//!
//! Reaching request `i` of a stream decodes one block; a stream's requests decode the
//! blocks the stream spans (one when it fits); the requests touching an offset decode
//! only the stream's blocks whose offset range holds it. Layout: docs/FORMATS.md,
//! "Stream set".

use crate::codec::{crc32c, put_uvarint, Cursor};
use crate::detect::Detector;
use crate::entropy::{self, Effort, MAX_BLOCK};
use crate::error::{CoreError, Result};
use crate::records;
use crate::seqcodec::{SeqDecoder, SeqEncoder};
use crate::streamset::{decode_streams_into, encode_streams};
use crate::tree::PatternSeq;
use std::collections::HashMap;

pub const MAGIC: &[u8; 4] = b"PSET";
pub const VERSION: u8 = 1;
/// Requests in one block at most.
pub const MAX_BLOCK_REQUESTS: usize = 1 << 15;
/// Streams in one set at most (bounds what a damaged header can ask for).
pub const MAX_STREAMS: u64 = 1 << 24;

const KIND_RECORDS: u8 = 0;
const KIND_PATTERNS: u8 = 1;

/// Which parts of the encoding are used; every combination decodes with the same
/// reader. All on by default; the others exist to measure what each part earns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Store repeated streams once.
    pub dedup: bool,
    /// Offer the pattern form of each block.
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

/// Encodes the `(offsets, lengths)` of every stream, in order.
pub fn encode(streams: &[(&[u64], &[u64])], detector: &Detector, opts: &Options) -> Vec<u8> {
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

    // Cut the stored streams' requests into blocks by their record size. A block
    // that starts inside a stream writes its first gap against 0 (up to 9 bytes more
    // than counted here): room is kept for it.
    let mut blocks: Vec<Vec<Piece>> = Vec::new();
    let (mut current, mut bytes, mut requests) = (Vec::<Piece>::new(), 1usize, 0usize);
    for (s, &k) in stored.iter().enumerate() {
        let (o, l) = streams[k];
        let mut start = 0;
        for (i, size) in records::sizes(o, l).enumerate() {
            if requests == MAX_BLOCK_REQUESTS || bytes + size + 9 > MAX_BLOCK {
                if i > start {
                    current.push(Piece {
                        stored: s,
                        start,
                        end: i,
                    });
                }
                blocks.push(std::mem::take(&mut current));
                (bytes, requests, start) = (1, 0, i);
            }
            bytes += size;
            requests += 1;
        }
        if o.len() > start {
            current.push(Piece {
                stored: s,
                start,
                end: o.len(),
            });
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }

    let mut header = Vec::new();
    put_uvarint(&mut header, streams.len() as u64);
    let mut columns = SeqEncoder::new();
    columns.encode(&PatternSeq::build(&source, detector), &mut header);
    columns.encode(&PatternSeq::build(&counts, detector), &mut header);
    put_uvarint(&mut header, blocks.len() as u64);
    let mut body = Vec::new();
    for pieces in &blocks {
        let views: Vec<(&[u64], &[u64])> = pieces
            .iter()
            .map(|p| {
                let (o, l) = streams[stored[p.stored]];
                (&o[p.start..p.end], &l[p.start..p.end])
            })
            .collect();
        let (raw, packed) = encode_block(&views, detector, opts);
        let n: usize = views.iter().map(|v| v.0.len()).sum();
        let lo = views.iter().flat_map(|v| v.0).copied().min().unwrap_or(0);
        let hi = views
            .iter()
            .flat_map(|v| v.0.iter().zip(v.1).map(|(&o, &l)| last_byte(o, l)))
            .max()
            .unwrap_or(0);
        put_uvarint(&mut header, n as u64);
        put_uvarint(&mut header, raw as u64);
        header.push(packed.codec);
        put_uvarint(&mut header, packed.bytes.len() as u64);
        header.extend_from_slice(&crc32c(&packed.bytes).to_le_bytes());
        put_uvarint(&mut header, lo);
        put_uvarint(&mut header, hi - lo);
        body.extend_from_slice(&packed.bytes);
    }

    let head = if header.len() <= MAX_BLOCK {
        entropy::pack(&header, opts.effort)
    } else {
        entropy::Packed {
            codec: entropy::CODEC_STORED,
            bytes: header.clone(),
        }
    };
    let mut out = Vec::with_capacity(16 + head.bytes.len() + body.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(head.codec);
    put_uvarint(&mut out, header.len() as u64);
    put_uvarint(&mut out, head.bytes.len() as u64);
    out.extend_from_slice(&crc32c(&head.bytes).to_le_bytes());
    out.extend_from_slice(&head.bytes);
    out.extend_from_slice(&body);
    out
}

/// The last byte a request touches, saturated at `u64::MAX` (its offset when empty:
/// a block's range may only be wider than its requests).
fn last_byte(offset: u64, length: u64) -> u64 {
    offset.saturating_add(length.max(1) - 1)
}

/// One block's raw length and its coded form: the smaller of the forms `opts` offers.
fn encode_block(
    views: &[(&[u64], &[u64])],
    detector: &Detector,
    opts: &Options,
) -> (usize, entropy::Packed) {
    let mut forms = Vec::new();
    if opts.patterns {
        let mut raw = vec![KIND_PATTERNS];
        raw.extend(encode_streams(views, detector, !opts.packed_literals));
        if raw.len() <= MAX_BLOCK {
            forms.push(raw);
        }
    }
    if opts.records || forms.is_empty() {
        let mut raw = vec![KIND_RECORDS];
        for (o, l) in views {
            records::put(o, l, &mut raw);
        }
        forms.push(raw);
    }
    forms
        .into_iter()
        .map(|raw| (raw.len(), entropy::pack(&raw, opts.effort)))
        .min_by_key(|(_, p)| p.bytes.len())
        .expect("at least the record form")
}

/// A block as the index describes it.
#[derive(Clone, Debug)]
pub struct BlockEntry {
    pub requests: u64,
    pub raw_len: usize,
    pub codec: u8,
    /// Where its stored bytes start in the set, and how many.
    pub at: usize,
    pub len: usize,
    crc: u32,
    /// Smallest offset and largest last byte of its requests.
    pub lo: u64,
    pub hi: u64,
    /// Position of its first request among all stored requests.
    first: u64,
}

/// Requests answering a query and the number of blocks decoded for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub requests: Vec<(u64, u64)>,
    pub blocks_decoded: usize,
}

/// An opened stream set: the header decoded, no block yet.
pub struct StreamSet<'a> {
    bytes: &'a [u8],
    /// Per stream, the stored stream holding its requests.
    stored_of: Vec<usize>,
    /// Per stored stream, the position of its first request and its request count.
    starts: Vec<u64>,
    counts: Vec<u64>,
    blocks: Vec<BlockEntry>,
}

impl<'a> StreamSet<'a> {
    /// Checks the header and reads the index; `bytes` is the whole set.
    pub fn open(bytes: &'a [u8]) -> Result<Self> {
        let mut c = Cursor::new(bytes);
        if c.take(4).ok() != Some(&MAGIC[..]) {
            return Err(CoreError::corrupt(0, "not a patio stream set (bad magic)"));
        }
        let version = c.u8()?;
        if version != VERSION {
            return Err(CoreError::corrupt(
                4,
                format!("stream set version {version}, this patio reads version {VERSION}"),
            ));
        }
        let codec = c.u8()?;
        let raw_len = c.uvarint()?;
        let len = c.count(c.remaining(), "header byte")?;
        let crc = c.u32_le()?;
        let at = c.position();
        let stored = c.take(len)?;
        if crc32c(stored) != crc {
            return Err(CoreError::corrupt(
                at,
                "stream set header checksum mismatch",
            ));
        }
        let header = if codec == entropy::CODEC_STORED && raw_len == len as u64 {
            std::borrow::Cow::Borrowed(stored)
        } else {
            entropy::unpack(codec, stored, raw_len.min(usize::MAX as u64) as usize, at)?
        };
        let body_at = c.position();
        let mut set = Self::read_index(&header, at)?;
        set.bytes = &bytes[body_at..];
        let mut end = 0usize;
        for b in &mut set.blocks {
            b.at = end;
            end = end
                .checked_add(b.len)
                .ok_or_else(|| CoreError::corrupt(at, "block sizes overflow"))?;
        }
        if end != set.bytes.len() {
            return Err(CoreError::corrupt(
                body_at,
                format!(
                    "blocks take {end} bytes, {} follow the header",
                    set.bytes.len()
                ),
            ));
        }
        for b in &mut set.blocks {
            b.at += body_at;
        }
        set.bytes = bytes;
        Ok(set)
    }

    fn read_index(header: &[u8], at: usize) -> Result<StreamSet<'a>> {
        let mut c = Cursor::with_base(header, at);
        let n = c.uvarint()?;
        if n > MAX_STREAMS {
            return Err(c.error(format!("{n} streams, more than {MAX_STREAMS}")));
        }
        let mut dec = SeqDecoder::new();
        let mut column = |c: &mut Cursor, len: u64, what: &str| -> Result<Vec<i64>> {
            let at = c.position();
            let seq = dec.decode(c)?;
            if seq.len() != len {
                return Err(CoreError::corrupt(
                    at,
                    format!("{what} column has {} values, expected {len}", seq.len()),
                ));
            }
            Ok(seq.expand())
        };
        let source = column(&mut c, n, "source")?;
        let mut stored_of = Vec::with_capacity(n as usize);
        let mut stored_count = 0usize;
        for (k, &d) in source.iter().enumerate() {
            stored_of.push(match d {
                0 => {
                    stored_count += 1;
                    stored_count - 1
                }
                d if d > 0 && d as usize <= k => stored_of[k - d as usize],
                d => return Err(c.error(format!("stream {k} copies an unknown stream ({d})"))),
            });
        }
        let counts = column(&mut c, stored_count as u64, "request count")?;
        let mut starts = Vec::with_capacity(counts.len());
        let mut total = 0u64;
        for &n in &counts {
            starts.push(total);
            total = total
                .checked_add(u64::try_from(n).map_err(|_| c.error("negative request count"))?)
                .ok_or_else(|| c.error("request counts overflow"))?;
        }
        let n_blocks = c.count(c.remaining() / 8, "block")?;
        let mut blocks = Vec::with_capacity(n_blocks);
        let mut first = 0u64;
        for _ in 0..n_blocks {
            let at = c.position();
            let requests = c.uvarint()?;
            let raw_len = c.uvarint()?;
            if requests == 0 || requests > MAX_BLOCK_REQUESTS as u64 || raw_len > MAX_BLOCK as u64 {
                return Err(CoreError::corrupt(
                    at,
                    format!("block of {requests} requests in {raw_len} bytes"),
                ));
            }
            let codec = c.u8()?;
            let len = c.uvarint()?.min(usize::MAX as u64) as usize;
            let crc = c.u32_le()?;
            let lo = c.uvarint()?;
            let hi = lo
                .checked_add(c.uvarint()?)
                .ok_or_else(|| CoreError::corrupt(at, "block offset range overflows"))?;
            blocks.push(BlockEntry {
                requests,
                raw_len: raw_len as usize,
                codec,
                at: 0,
                len,
                crc,
                lo,
                hi,
                first,
            });
            first += requests;
        }
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the block index"));
        }
        if first != total {
            return Err(c.error(format!("blocks hold {first} requests, the streams {total}")));
        }
        Ok(StreamSet {
            bytes: &[],
            stored_of,
            starts,
            counts: counts.into_iter().map(|n| n as u64).collect(),
            blocks,
        })
    }

    pub fn streams(&self) -> usize {
        self.stored_of.len()
    }

    pub fn blocks(&self) -> &[BlockEntry] {
        &self.blocks
    }

    /// Requests of stream `k`.
    pub fn stream_len(&self, k: usize) -> Result<u64> {
        Ok(self.counts[self.stored(k)?])
    }

    fn stored(&self, k: usize) -> Result<usize> {
        self.stored_of.get(k).copied().ok_or_else(|| {
            CoreError::Invalid(format!(
                "no stream {k}: the set holds {} streams",
                self.stored_of.len()
            ))
        })
    }

    /// The blocks holding stored requests `[from, to)`.
    fn blocks_between(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let first = self
            .blocks
            .partition_point(|b| b.first + b.requests <= from);
        let last = self.blocks.partition_point(|b| b.first < to);
        first..last.max(first)
    }

    /// Decodes block `b`: its requests in order.
    pub fn decode_block(&self, b: usize) -> Result<Vec<(u64, u64)>> {
        let (mut o, mut l) = (Vec::new(), Vec::new());
        self.decode_block_into(b, &mut o, &mut l)?;
        Ok(o.into_iter().zip(l).collect())
    }

    /// Decodes block `b`, appending its requests' offsets and lengths (stored streams
    /// in order) to `offsets` and `lengths`.
    fn decode_block_into(
        &self,
        b: usize,
        offsets: &mut Vec<u64>,
        lengths: &mut Vec<u64>,
    ) -> Result<()> {
        let e = &self.blocks[b];
        let stored = &self.bytes[e.at..e.at + e.len];
        if crc32c(stored) != e.crc {
            return Err(CoreError::corrupt(
                e.at,
                format!("block {b} checksum mismatch"),
            ));
        }
        let raw = entropy::unpack(e.codec, stored, e.raw_len, e.at)?;
        // The pieces: runs of one stored stream inside the block.
        let mut pieces = Vec::new();
        let (mut pos, end) = (e.first, e.first + e.requests);
        while pos < end {
            let s = self.starts.partition_point(|&st| st <= pos) - 1;
            let stop = (self.starts[s] + self.counts[s]).min(end);
            if stop > pos {
                pieces.push((stop - pos) as usize);
            }
            pos = stop;
        }
        offsets.reserve(e.requests as usize);
        lengths.reserve(e.requests as usize);
        let mut c = Cursor::with_base(&raw, e.at);
        match c.u8()? {
            KIND_RECORDS => {
                for &n in &pieces {
                    records::get_into(&mut c, n, offsets, lengths)?;
                }
                if !c.is_at_end() {
                    return Err(c.error("trailing bytes after the block's records"));
                }
            }
            KIND_PATTERNS => {
                let counts = decode_streams_into(
                    &raw[1..],
                    pieces.len() as u64,
                    e.requests,
                    e.at,
                    offsets,
                    lengths,
                )?;
                if counts != pieces {
                    return Err(CoreError::corrupt(
                        e.at,
                        format!("block {b} holds streams of other lengths than its index says"),
                    ));
                }
            }
            kind => {
                return Err(CoreError::corrupt(
                    e.at,
                    format!("unknown block form {kind}"),
                ))
            }
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
        let (lo, hi) = (self.starts[s] + from, self.starts[s] + to);
        let mut answer = Answer {
            requests: Vec::new(),
            blocks_decoded: 0,
        };
        let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
        for b in self.blocks_between(lo, hi) {
            let e = &self.blocks[b];
            if !keep(e) {
                continue;
            }
            offsets.clear();
            lengths.clear();
            self.decode_block_into(b, &mut offsets, &mut lengths)?;
            answer.blocks_decoded += 1;
            let a = (lo.max(e.first) - e.first) as usize;
            let z = (hi.min(e.first + e.requests) - e.first) as usize;
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
        let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
        for b in 0..self.blocks.len() {
            self.decode_block_into(b, &mut offsets, &mut lengths)?;
        }
        let copies = self.stored_of.iter().enumerate().any(|(k, &s)| k != s);
        let mut bounds = Vec::with_capacity(self.stored_of.len() + 1);
        bounds.push(0);
        if !copies {
            // Every stream stored in order: the stored requests are the answer.
            bounds.extend(
                self.starts
                    .iter()
                    .zip(&self.counts)
                    .map(|(s, n)| (s + n) as usize),
            );
            return Ok(Decoded {
                offsets,
                lengths,
                bounds,
            });
        }
        let total = self
            .stored_of
            .iter()
            .map(|&s| self.counts[s] as usize)
            .sum();
        let (mut all_offsets, mut all_lengths) =
            (Vec::with_capacity(total), Vec::with_capacity(total));
        for &s in &self.stored_of {
            let range = self.starts[s] as usize..(self.starts[s] + self.counts[s]) as usize;
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
