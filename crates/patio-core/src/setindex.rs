//! The head and block index of a stream set (`blockset.rs`): which streams a set holds,
//! which of them copy an earlier one, how many requests each has, and where each
//! block's bytes are and how they are checked. Read for format versions 1 and 2,
//! written in version 2. Layout: docs/FORMATS.md, "Stream set".
//!
//! Version 2 keeps the fixed part small, so that a small or degenerate trace does not
//! pay more for the index than for its requests: no magic (a set is always inside a
//! file with its own, or in memory), one head byte (version and flags), one CRC32C.
//! A set whose requests fit one block stores no block table at all: its index and its
//! block are coded together as one unit under the one checksum. A set of several
//! blocks cuts the stored requests into blocks of one request count, so its table
//! holds per block only four bytes: the stored length, the codec and a 13-bit check
//! (version 3; version 2 wrote a varint length with the codec and a 16-bit check).

use crate::codec::{crc32c, put_uvarint, Cursor};
use crate::detect::Detector;
use crate::entropy::{self, Effort, Packed, MAX_BLOCK};
use crate::error::{CoreError, Result};
use crate::seqcodec::{SeqDecoder, SeqEncoder};
use crate::unitform::{get_aligned, get_aligned_signed, put_aligned, put_aligned_signed};
use std::borrow::Cow;

/// The version this patio writes; it reads versions 1, 2 and 3.
pub const VERSION: u8 = 3;
/// Version 2: what version 3 adds is the unit block form, four-byte table entries
/// and offset ranges as differences.
pub const V2: u8 = 2;
/// Version 1 sets start with this magic (and then `u8 1`).
const V1_MAGIC: &[u8; 4] = b"PSET";
const V1: u8 = 1;
/// The head byte: the version in its low three bits, flags above.
const VERSION_MASK: u8 = 0b111;
/// The set has a block table (several blocks, or one too long to code with its index).
const MULTI: u8 = 1 << 3;
/// A source column is present: some stream repeats an earlier one.
const COPIES: u8 = 1 << 4;
/// The block table gives each block's offset range.
const RANGES: u8 = 1 << 5;
/// The unit (or the index) is entropy-coded: a codec byte and its raw length precede
/// it; otherwise it is stored as is.
const CODED: u8 = 1 << 6;
/// Every stored stream has the same number of requests, written once as an aligned
/// varint instead of the count column (version 3).
const EQUAL: u8 = 1 << 7;
const FLAGS: u8 = MULTI | COPIES | RANGES | CODED;
/// A version 3 table entry: `u32le`, the stored length less one in the low 16 bits,
/// the codec's number in [`entropy::WRITTEN`] in the next 3, the check in the top 13.
const ENTRY: usize = 4;
const CHECK13: u16 = (1 << 13) - 1;
/// Bytes before the coded part: head and CRC32C.
const HEAD: usize = 5;

/// Requests in one block at most (4 MiB of offsets and lengths expanded).
pub const MAX_BLOCK_REQUESTS: usize = 1 << 18;
/// Streams in one set at most (bounds what a damaged header can ask for).
pub const MAX_STREAMS: u64 = 1 << 24;

/// How a block's stored bytes are checked before they are decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// CRC32C of the stored bytes (version 1).
    Crc32(u32),
    /// The low 16 bits of that CRC32C (version 2, sets of several blocks).
    Low16(u16),
    /// The low 13 bits of that CRC32C (version 3, sets of several blocks).
    Low13(u16),
    /// Covered by the set's own checksum, verified when the set was opened (version 2,
    /// one block).
    Set,
}

impl Check {
    fn holds(self, stored: &[u8]) -> bool {
        match self {
            Check::Crc32(crc) => crc32c(stored) == crc,
            Check::Low16(low) => crc32c(stored) as u16 == low,
            Check::Low13(low) => crc32c(stored) as u16 & CHECK13 == low,
            Check::Set => true,
        }
    }
}

/// A block as the index describes it.
#[derive(Clone, Debug)]
pub struct BlockEntry {
    pub requests: u64,
    /// Its raw length when the index gives it; otherwise at most 64 KiB.
    pub raw_len: Option<usize>,
    pub codec: u8,
    /// Where its stored bytes start in [`Index::bytes`], and how many.
    pub at: usize,
    pub len: usize,
    pub check: Check,
    /// Smallest offset and largest last byte of its requests (`0..=u64::MAX` when the
    /// index does not say).
    pub lo: u64,
    pub hi: u64,
    /// Position of its first request among all stored requests.
    pub first: u64,
}

impl BlockEntry {
    /// Its raw bytes, checked and decoded from `bytes` (the [`Index::bytes`] it
    /// belongs to); `base` shifts error offsets.
    pub fn raw<'b>(&self, bytes: &'b [u8], base: usize) -> Result<Cow<'b, [u8]>> {
        let stored = &bytes[self.at..self.at + self.len];
        let at = base + self.at;
        if !self.check.holds(stored) {
            return Err(CoreError::corrupt(at, "block checksum mismatch"));
        }
        match self.raw_len {
            Some(n) => entropy::unpack(self.codec, stored, n, at),
            None => entropy::unpack_within(self.codec, stored, MAX_BLOCK, at),
        }
    }
}

/// A set's index, read and checked.
pub struct Index<'a> {
    /// What the blocks' positions refer to: the set, or for a one-block set of version
    /// 2 its decoded unit (index and block).
    pub bytes: Cow<'a, [u8]>,
    /// Where `bytes` start in the set (error offsets; 0 for a decoded unit's coded
    /// bytes, whose positions are not file positions).
    pub base: usize,
    /// Per stream, the stored stream holding its requests.
    pub stored_of: Vec<usize>,
    /// Per stored stream, the position of its first request and its request count.
    pub starts: Vec<u64>,
    pub counts: Vec<u64>,
    pub blocks: Vec<BlockEntry>,
    /// The set's format version.
    pub version: u8,
}

impl<'a> Index<'a> {
    fn new(
        bytes: Cow<'a, [u8]>,
        base: usize,
        s: Streams,
        blocks: Vec<BlockEntry>,
        version: u8,
    ) -> Self {
        Index {
            bytes,
            base,
            stored_of: s.stored_of,
            starts: s.starts,
            counts: s.counts,
            blocks,
            version,
        }
    }
}

/// Streams and request counts as an index holds them.
struct Streams {
    stored_of: Vec<usize>,
    starts: Vec<u64>,
    counts: Vec<u64>,
    total: u64,
}

/// Reads the stream count, the source column (version 1 always; version 2 only with
/// `copies`, otherwise every stream is stored) and the stored streams' request counts.
fn read_streams(c: &mut Cursor, version: u8, head: u8) -> Result<Streams> {
    let copies = head & COPIES != 0;
    let n = c.uvarint()?;
    if n > MAX_STREAMS {
        return Err(c.error(format!("{n} streams, more than {MAX_STREAMS}")));
    }
    let mut dec = SeqDecoder::new();
    let mut column = |c: &mut Cursor, len: u64, what: &str| -> Result<Vec<i64>> {
        let at = c.position();
        if version == V1 {
            let seq = dec.decode(c)?;
            if seq.len() != len {
                return Err(CoreError::corrupt(
                    at,
                    format!("{what} column has {} values, expected {len}", seq.len()),
                ));
            }
            Ok(seq.expand())
        } else {
            dec.decode_column(c, len as usize)
        }
    };
    let source = if version == V1 || copies {
        column(c, n, "source")?
    } else {
        vec![0; n as usize]
    };
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
    let counts = match head & EQUAL {
        0 => column(c, stored_count as u64, "request count")?,
        _ => {
            let n = get_aligned(c)?;
            let n = i64::try_from(n).map_err(|_| c.error(format!("{n} requests per stream")))?;
            vec![n; stored_count]
        }
    };
    let mut starts = Vec::with_capacity(counts.len());
    let mut total = 0u64;
    for &n in &counts {
        starts.push(total);
        total = total
            .checked_add(u64::try_from(n).map_err(|_| c.error("negative request count"))?)
            .ok_or_else(|| c.error("request counts overflow"))?;
    }
    Ok(Streams {
        stored_of,
        starts,
        counts: counts.into_iter().map(|n| n as u64).collect(),
        total,
    })
}

/// Opens a set: checks its head and checksum and reads its index, decoding no block
/// (a one-block set of version 2 decodes its unit, index and block coded together).
pub fn read(bytes: &[u8]) -> Result<Index<'_>> {
    if bytes.starts_with(V1_MAGIC) {
        return read_v1(bytes);
    }
    let head = *bytes
        .first()
        .ok_or_else(|| CoreError::corrupt(0, "empty stream set"))?;
    let version = head & VERSION_MASK;
    if version != VERSION && version != V2 {
        return Err(CoreError::corrupt(
            0,
            format!("stream set version {version}, this patio reads versions 1 to {VERSION}"),
        ));
    }
    let known = if version == V2 { FLAGS } else { FLAGS | EQUAL };
    if head & !(VERSION_MASK | known) != 0 {
        return Err(CoreError::corrupt(
            0,
            format!("stream set flags {head:#04x} unknown"),
        ));
    }
    let mut c = Cursor::new(bytes);
    c.u8()?;
    let crc = c.u32_le()?;
    if head & MULTI == 0 {
        return read_one_block(bytes, head, crc, version);
    }
    let (codec, raw_len) = match head & CODED {
        0 => (entropy::CODEC_STORED, None),
        _ => (c.u8()?, Some(c.uvarint()?)),
    };
    let len = c.count(c.remaining(), "index byte")?;
    let at = c.position();
    let stored = c.take(len)?;
    if checksum(head, &bytes[HEAD..c.position()]) != crc {
        return Err(CoreError::corrupt(1, "stream set index checksum mismatch"));
    }
    let index = match raw_len {
        None => Cow::Borrowed(stored),
        Some(n) => entropy::unpack(codec, stored, n.min(usize::MAX as u64) as usize, at)?,
    };
    let mut c = Cursor::with_base(&index, at);
    let s = read_streams(&mut c, version, head)?;
    let per_block = c.uvarint()?;
    if per_block == 0 || per_block > MAX_BLOCK_REQUESTS as u64 {
        return Err(c.error(format!("{per_block} requests per block")));
    }
    let n_blocks = s.total.div_ceil(per_block);
    // A table entry takes at least three bytes (version 2), or four.
    let least = if version == V2 { 3 } else { ENTRY };
    if n_blocks > (c.remaining() / least) as u64 {
        return Err(c.error(format!("{n_blocks} blocks, more than the table can hold")));
    }
    let mut blocks = Vec::with_capacity(n_blocks as usize);
    for b in 0..n_blocks {
        let here = c.position();
        let (codec, len, check) = match version {
            V2 => {
                let x = c.uvarint()?;
                let len = (x >> 3).min(usize::MAX as u64) as usize;
                (x & 7, len, Check::Low16(c.u16_le()?))
            }
            _ => {
                let x = c.u32_le()?;
                let len = (x & 0xffff) as usize + 1;
                (u64::from(x >> 16 & 7), len, Check::Low13((x >> 19) as u16))
            }
        };
        let codec = *entropy::WRITTEN
            .get(codec as usize)
            .ok_or_else(|| CoreError::corrupt(here, format!("unknown codec {codec}")))?;
        let first = b * per_block;
        blocks.push(BlockEntry {
            requests: per_block.min(s.total - first),
            raw_len: None,
            codec,
            at: 0,
            len,
            check,
            lo: 0,
            hi: u64::MAX,
            first,
        });
    }
    if head & RANGES != 0 {
        let mut lo = 0u64;
        for b in &mut blocks {
            let here = c.position();
            let span = match version {
                V2 => {
                    b.lo = c.uvarint()?;
                    Some(c.uvarint()?)
                }
                _ => {
                    lo = lo.wrapping_add(get_aligned_signed(&mut c)? as u64);
                    b.lo = lo;
                    // The range's width, one more than `hi - lo` (0: every offset).
                    get_aligned(&mut c)?.checked_sub(1)
                }
            };
            b.hi = span
                .map_or((b.lo == 0).then_some(u64::MAX), |w| b.lo.checked_add(w))
                .ok_or_else(|| CoreError::corrupt(here, "block offset range overflows"))?;
        }
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the block table"));
    }
    locate(&mut blocks, at + len, bytes.len())?;
    Ok(Index::new(Cow::Borrowed(bytes), 0, s, blocks, version))
}

/// Places blocks one after the other from `start`; they must end at `end`.
fn locate(blocks: &mut [BlockEntry], start: usize, end: usize) -> Result<()> {
    let mut at = start;
    for b in blocks.iter_mut() {
        b.at = at;
        at = at
            .checked_add(b.len)
            .ok_or_else(|| CoreError::corrupt(start, "block sizes overflow"))?;
    }
    if at != end {
        return Err(CoreError::corrupt(
            start,
            format!(
                "blocks take {} bytes, {} follow the index",
                at - start,
                end.saturating_sub(start)
            ),
        ));
    }
    Ok(())
}

/// A version 2 set without a block table: with the `CODED` flag `u8 codec` and
/// `uvar raw_length`, then the unit (index and the one block's raw bytes), all under the CRC32C.
fn read_one_block(bytes: &[u8], head: u8, crc: u32, version: u8) -> Result<Index<'_>> {
    if head & RANGES != 0 {
        return Err(CoreError::corrupt(
            0,
            "offset ranges flagged on a set without a table",
        ));
    }
    if checksum(head, &bytes[HEAD..]) != crc {
        return Err(CoreError::corrupt(1, "stream set checksum mismatch"));
    }
    let mut c = Cursor::with_base(&bytes[HEAD..], HEAD);
    let (codec, raw_len) = match head & CODED {
        0 => (entropy::CODEC_STORED, None),
        _ => (c.u8()?, Some(c.uvarint()?.min(usize::MAX as u64) as usize)),
    };
    // Errors inside the unit name positions from its start (exact when it is stored).
    let base = c.position();
    let stored = c.take(c.remaining())?;
    let unit = match raw_len {
        None if stored.len() > MAX_BLOCK => {
            return Err(CoreError::corrupt(
                base,
                "stream set unit longer than a block",
            ))
        }
        None => Cow::Borrowed(stored),
        Some(n) => entropy::unpack(codec, stored, n, base)?,
    };
    let mut u = Cursor::with_base(&unit, base);
    let s = read_streams(&mut u, version, head)?;
    let raw_at = unit.len() - u.remaining();
    let mut blocks = Vec::new();
    if s.total > 0 {
        if s.total > MAX_BLOCK_REQUESTS as u64 {
            return Err(u.error(format!("one block of {} requests", s.total)));
        }
        blocks.push(BlockEntry {
            requests: s.total,
            raw_len: Some(unit.len() - raw_at),
            codec: entropy::CODEC_STORED,
            at: raw_at,
            len: unit.len() - raw_at,
            check: Check::Set,
            lo: 0,
            hi: u64::MAX,
            first: 0,
        });
    } else if !u.is_at_end() {
        return Err(u.error("trailing bytes after a set without requests"));
    }
    Ok(Index::new(unit, base, s, blocks, version))
}

/// A version 1 set: magic, version, coded header with the stream columns and a block
/// table of requests, raw and stored lengths, codec, CRC32C and offset range per block.
fn read_v1(bytes: &[u8]) -> Result<Index<'_>> {
    let mut c = Cursor::new(bytes);
    c.take(4)?;
    let version = c.u8()?;
    if version != V1 {
        return Err(CoreError::corrupt(
            4,
            format!("stream set version {version}, this patio reads versions 1 and 2"),
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
        Cow::Borrowed(stored)
    } else {
        entropy::unpack(codec, stored, raw_len.min(usize::MAX as u64) as usize, at)?
    };
    let body_at = c.position();
    let mut c = Cursor::with_base(&header, at);
    let s = read_streams(&mut c, V1, COPIES)?;
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
            raw_len: Some(raw_len as usize),
            codec,
            at: 0,
            len,
            check: Check::Crc32(crc),
            lo,
            hi,
            first,
        });
        first += requests;
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the block index"));
    }
    if first != s.total {
        return Err(c.error(format!(
            "blocks hold {first} requests, the streams {}",
            s.total
        )));
    }
    locate(&mut blocks, body_at, bytes.len())?;
    Ok(Index::new(Cow::Borrowed(bytes), 0, s, blocks, V1))
}

/// What the writer knows of the streams: per stream 0 (stored) or the distance back
/// to the stream it copies, and per stored stream its request count.
pub struct Columns<'s> {
    pub source: &'s [i64],
    pub counts: &'s [i64],
}

impl Columns<'_> {
    fn copies(&self) -> bool {
        self.source.iter().any(|&d| d != 0)
    }

    /// Every stored stream has the same request count (and there is one).
    fn equal(&self) -> bool {
        self.counts.windows(2).all(|w| w[0] == w[1]) && !self.counts.is_empty()
    }

    fn put(&self, detector: &Detector, out: &mut Vec<u8>) {
        let mut enc = SeqEncoder::new();
        put_uvarint(out, self.source.len() as u64);
        if self.copies() {
            enc.encode_column(self.source, detector, out);
        }
        if self.equal() {
            put_aligned(out, self.counts[0] as u64);
        } else {
            enc.encode_column(self.counts, detector, out);
        }
    }

    fn head(&self, flags: u8) -> u8 {
        let copies = if self.copies() { COPIES } else { 0 };
        VERSION | flags | copies | if self.equal() { EQUAL } else { 0 }
    }
}

/// A one-block set: the index and the raw block (one of `forms`, the smallest once
/// coded) as one unit, or `None` when no form fits a block with the index.
pub fn write_one_block(
    columns: &Columns,
    forms: &[Vec<u8>],
    detector: &Detector,
    effort: Effort,
) -> Option<Vec<u8>> {
    let mut index = Vec::new();
    columns.put(detector, &mut index);
    let units: Vec<Vec<u8>> = forms
        .iter()
        .filter(|raw| index.len() + raw.len() <= MAX_BLOCK)
        .map(|raw| [index.as_slice(), raw].concat())
        .collect();
    let views: Vec<&[u8]> = units.iter().map(Vec::as_slice).collect();
    let (i, best) = entropy::pack_smallest(&views, effort)?;
    let coded = best.codec != entropy::CODEC_STORED;
    let mut out = vec![columns.head(if coded { CODED } else { 0 }), 0, 0, 0, 0];
    if coded {
        out.push(best.codec);
        put_uvarint(&mut out, units[i].len() as u64);
    }
    out.extend_from_slice(&best.bytes);
    seal(&mut out);
    Some(out)
}

/// A block of a set of several: its coded bytes and the offset range of its requests.
pub struct Written {
    pub packed: Packed,
    pub lo: u64,
    pub hi: u64,
}

/// A set of several blocks of `per_block` requests (the last may hold fewer).
/// `ranges`: the table gives each block's offset range.
pub fn write_blocks(
    columns: &Columns,
    per_block: usize,
    blocks: &[Written],
    ranges: bool,
    detector: &Detector,
    effort: Effort,
) -> Vec<u8> {
    let mut index = Vec::new();
    columns.put(detector, &mut index);
    put_uvarint(&mut index, per_block as u64);
    for b in blocks {
        let codec = entropy::WRITTEN
            .iter()
            .position(|&c| c == b.packed.codec)
            .expect("blocks are coded by entropy::pack");
        let len = b.packed.bytes.len();
        assert!(
            (1..=MAX_BLOCK).contains(&len),
            "stored block of {len} bytes"
        );
        let check = crc32c(&b.packed.bytes) as u16 & CHECK13;
        let entry = (len - 1) as u32 | (codec as u32) << 16 | u32::from(check) << 19;
        index.extend_from_slice(&entry.to_le_bytes());
    }
    if ranges {
        let mut lo = 0u64;
        for b in blocks {
            put_aligned_signed(&mut index, b.lo.wrapping_sub(lo) as i64);
            put_aligned(&mut index, (b.hi - b.lo).wrapping_add(1));
            lo = b.lo;
        }
    }
    let packed = if index.len() <= MAX_BLOCK {
        entropy::pack(&index, effort)
    } else {
        Packed {
            codec: entropy::CODEC_STORED,
            bytes: index.clone(),
        }
    };
    let coded = packed.codec != entropy::CODEC_STORED;
    let flags = MULTI | if ranges { RANGES } else { 0 } | if coded { CODED } else { 0 };
    let mut out = vec![columns.head(flags), 0, 0, 0, 0];
    if coded {
        out.push(packed.codec);
        put_uvarint(&mut out, index.len() as u64);
    }
    put_uvarint(&mut out, packed.bytes.len() as u64);
    out.extend_from_slice(&packed.bytes);
    seal(&mut out);
    for b in blocks {
        out.extend_from_slice(&b.packed.bytes);
    }
    out
}

/// Writes the CRC32C of the head and of everything after the checksum into the
/// checksum.
fn seal(out: &mut [u8]) {
    let crc = checksum(out[0], &out[HEAD..]);
    out[1..HEAD].copy_from_slice(&crc.to_le_bytes());
}

/// The set's CRC32C: of the head byte followed by `covered`.
fn checksum(head: u8, covered: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c(&[head]), covered)
}
