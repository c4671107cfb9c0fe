//! Entropy coding of independent blocks of at most [`MAX_BLOCK`] bytes: the last stage of
//! the stream-set and native-trace encodings (docs/FORMATS.md, "Block coder").
//!
//! Each block is coded on its own — a reader decodes any block without the others — by
//! the smallest of: stored as is, zstd (level 19 up to [`ZSTD_HIGH_MAX`] bytes, level 9
//! above: there LZMA is smaller and level 19 would cost most of the encoding time), or
//! LZMA with one of a few literal context / position settings (varint payloads favour
//! few context bits). The choice is one byte, the *codec*:
//!
//! * `0` stored;
//! * `1` zstd frame;
//! * `2 + p` raw LZMA data with properties byte `p = (pb · 5 + lp) · 9 + lc`, a 64 KiB
//!   dictionary and an end marker: the 13-byte `.lzma` header is not stored, since the
//!   dictionary is fixed and the properties are in the codec byte.
//!
//! Decoding is bounded by the raw length the caller gives (from its block index): a
//! damaged block can neither allocate more nor decode to a different length unnoticed.
//! Small blocks decode in microseconds, so the decoders' fixed costs matter: each
//! thread keeps one zstd context and one raw LZMA decoder across blocks (liblzma and
//! zstd keep their tables and state instead of allocating them per block), an LZMA
//! dictionary is sized to the block, and a stored block is returned without a copy.

use crate::error::{CoreError, Result};
use std::borrow::Cow;

/// Largest raw block.
pub const MAX_BLOCK: usize = 1 << 16;

pub const CODEC_STORED: u8 = 0;
pub const CODEC_ZSTD: u8 = 1;
const CODEC_LZMA: u8 = 2;

/// LZMA dictionary: a block is never longer.
const DICT: u32 = MAX_BLOCK as u32;
/// `(lc, lp, pb)` settings tried per block.
const LZMA_SETTINGS: [(u32, u32, u32); 3] = [(1, 0, 0), (3, 0, 2), (0, 0, 0)];
/// The codec byte of raw LZMA with `(lc, lp, pb)`.
const fn lzma_codec((lc, lp, pb): (u32, u32, u32)) -> u8 {
    CODEC_LZMA + ((pb * 5 + lp) * 9 + lc) as u8
}

/// Every codec [`pack`] writes. Stream sets of version 2 number a block's codec by its
/// position here (docs/FORMATS.md, "Stream set"): the order must not change.
pub const WRITTEN: [u8; 5] = [
    CODEC_STORED,
    CODEC_ZSTD,
    lzma_codec(LZMA_SETTINGS[0]),
    lzma_codec(LZMA_SETTINGS[1]),
    lzma_codec(LZMA_SETTINGS[2]),
];
const ZSTD_LEVEL: i32 = 19;
/// Largest block given zstd's [`ZSTD_LEVEL`] at [`Effort::Best`]; longer ones get
/// [`FAST_ZSTD_LEVEL`]. On the real traces zstd wins only blocks of a few hundred
/// bytes, and level 19 takes 5× LZMA's time on a full 64 KiB block.
pub const ZSTD_HIGH_MAX: usize = 16 << 10;
/// liblzma preset: 9, extreme.
const LZMA_PRESET: u32 = 9;

/// How hard the coder tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// Every codec and LZMA setting, keep the smallest.
    Best,
    /// Only the stored form (ablation: no entropy coding).
    Stored,
    /// One zstd and one LZMA trial at moderate levels: for writers' hot paths
    /// (container index records), where the coder runs at every flush.
    Fast,
}

/// Blocks shorter than this get no LZMA trial at [`Effort::Fast`] (a writer's
/// flush of a few writes: the encoder's set-up would dominate).
const FAST_LZMA_MIN: usize = 4096;

/// zstd level and liblzma preset of [`Effort::Fast`].
const FAST_ZSTD_LEVEL: i32 = 9;
const FAST_LZMA_PRESET: u32 = 6;

/// A block as written: its codec and its stored bytes.
pub struct Packed {
    pub codec: u8,
    pub bytes: Vec<u8>,
}

/// LZMA-codes `raw` with a dictionary of `dict` bytes (at least the block's length:
/// every match stays inside the block, and the decoder sizes its own), or `None` when
/// that takes more than `limit` bytes (the caller has something smaller).
fn lzma(
    raw: &[u8],
    preset: u32,
    settings: (u32, u32, u32),
    dict: u32,
    limit: usize,
) -> Option<Vec<u8>> {
    LZMA_ENCODER.with(|cell| {
        cell.borrow_mut()
            .get_or_insert_with(RawLzma::new)
            .encode(raw, preset, settings, dict, limit)
    })
}

/// Codes one block (at most [`MAX_BLOCK`] bytes) in the smallest form `effort` allows.
pub fn pack(raw: &[u8], effort: Effort) -> Packed {
    pack_from(raw, effort, stored(raw), 0)
}

/// The block stored as is.
fn stored(raw: &[u8]) -> Packed {
    assert!(raw.len() <= MAX_BLOCK, "block of {} bytes", raw.len());
    Packed {
        codec: CODEC_STORED,
        bytes: raw.to_vec(),
    }
}

/// The zstd level, LZMA preset and LZMA settings `effort` tries on a block of `len`
/// bytes.
fn plan(len: usize, effort: Effort) -> (i32, u32, &'static [(u32, u32, u32)]) {
    match effort {
        // Setting up an LZMA encoder costs more than coding a small block: zstd alone.
        Effort::Fast if len < FAST_LZMA_MIN => (FAST_ZSTD_LEVEL, FAST_LZMA_PRESET, &[][..]),
        Effort::Fast => (FAST_ZSTD_LEVEL, FAST_LZMA_PRESET, &LZMA_SETTINGS[..1]),
        _ if len <= ZSTD_HIGH_MAX => (ZSTD_LEVEL, LZMA_PRESET, &LZMA_SETTINGS[..]),
        _ => (FAST_ZSTD_LEVEL, LZMA_PRESET, &LZMA_SETTINGS[..]),
    }
}

/// [`pack`] starting from `best`, trying zstd unless `skip` > 0 and the LZMA settings
/// from the `skip`-th on (those before were tried for `best`).
fn pack_from(raw: &[u8], effort: Effort, mut best: Packed, skip: usize) -> Packed {
    if effort == Effort::Stored || raw.is_empty() {
        return best;
    }
    let (zstd_level, preset, settings) = plan(raw.len(), effort);
    // On a small block the encoder's set-up dominates: a dictionary of the block's
    // size (the smallest liblzma takes is 4 KiB; no match reaches before the block's
    // start anyway), and one zstd context kept per thread.
    let dict = (raw.len() as u32).clamp(4096, DICT);
    let zstd_out = zstd_frame(raw, zstd_level);
    if let Some(bytes) = zstd_out.filter(|z| z.len() < best.bytes.len()) {
        best = Packed {
            codec: CODEC_ZSTD,
            bytes,
        };
    }
    for &setting in settings.iter().skip(skip) {
        // Coding stops once it is no smaller than the best so far.
        if let Some(bytes) = lzma(raw, preset, setting, dict, best.bytes.len() - 1) {
            best = Packed {
                codec: lzma_codec(setting),
                bytes,
            };
        }
    }
    best
}

/// Forms within this share (1/8) of the smallest after the first LZMA trial, plus
/// [`PRUNE_SLACK`] bytes, get the other trials.
const PRUNE_SHARE: usize = 8;
const PRUNE_SLACK: usize = 16;

/// Codes the smallest of several raw forms of one block: which form, and its coded
/// bytes. At [`Effort::Best`] every form first gets the first LZMA setting only, and
/// only the forms that came within 1/8 of the smallest get the other trials (zstd,
/// the other settings): the trials rank forms alike, and coding a form that is far
/// behind with every coder was most of the writer's time. `None` without forms.
pub fn pack_smallest(forms: &[&[u8]], effort: Effort) -> Option<(usize, Packed)> {
    if effort != Effort::Best || forms.len() < 2 {
        return forms
            .iter()
            .map(|raw| pack(raw, effort))
            .enumerate()
            .min_by_key(|(_, p)| p.bytes.len());
    }
    let firsts: Vec<Packed> = forms
        .iter()
        .map(|raw| {
            let (_, preset, settings) = plan(raw.len(), effort);
            let first = stored(raw);
            let dict = (raw.len() as u32).clamp(4096, DICT);
            match lzma(raw, preset, settings[0], dict, raw.len().saturating_sub(1)) {
                Some(bytes) => Packed {
                    codec: lzma_codec(settings[0]),
                    bytes,
                },
                None => first,
            }
        })
        .collect();
    let least = firsts.iter().map(|p| p.bytes.len()).min()?;
    let near = least + least / PRUNE_SHARE + PRUNE_SLACK;
    forms
        .iter()
        .zip(firsts)
        .enumerate()
        .filter(|(_, (_, p))| p.bytes.len() <= near)
        .map(|(i, (raw, p))| (i, pack_from(raw, effort, p, 1)))
        .min_by_key(|(_, p)| p.bytes.len())
}

thread_local! {
    /// One zstd coding context per thread and the level it is set to: creating one
    /// per block (its tables allocated and cleared) cost more than coding a small one.
    static ZSTD_ENCODER: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// A zstd frame of `raw` at `level`.
fn zstd_frame(raw: &[u8], level: i32) -> Option<Vec<u8>> {
    ZSTD_ENCODER.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (set, c) = match cell.as_mut() {
            Some(c) => c,
            None => cell.insert((level, zstd::bulk::Compressor::new(level).ok()?)),
        };
        if *set != level {
            c.set_compression_level(level).ok()?;
            *set = level;
        }
        c.compress(raw).ok()
    })
}

thread_local! {
    /// One zstd decoding context per thread, reused by every block: creating one costs
    /// more than decoding a small block (it allocates its tables and probes the CPU).
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn unzstd(bytes: &[u8], raw_len: usize) -> std::io::Result<Vec<u8>> {
    ZSTD.with(|cell| {
        let mut cell = cell.borrow_mut();
        let d = match cell.as_mut() {
            Some(d) => d,
            None => cell.insert(zstd::bulk::Decompressor::new()?),
        };
        d.decompress(bytes, raw_len)
    })
}

/// A raw LZMA coder kept per thread: re-initialised for each block, liblzma keeps its
/// allocations (decoder state, a dictionary of the same size) instead of making them
/// anew.
struct RawLzma(Box<lzma_sys::lzma_stream>);

impl RawLzma {
    fn new() -> Self {
        // SAFETY: an all-zero `lzma_stream` is `LZMA_STREAM_INIT`.
        RawLzma(Box::new(unsafe { std::mem::zeroed() }))
    }

    /// Decodes the raw LZMA data of a block of `raw_len` bytes with properties byte
    /// `props`, ended by an end marker.
    fn decode(
        &mut self,
        props: u8,
        bytes: &[u8],
        raw_len: usize,
    ) -> std::result::Result<Vec<u8>, String> {
        // SAFETY: an all-zero `lzma_options_lzma` is plain integers and null pointers;
        // the fields the decoder reads are set below.
        let mut opts: lzma_sys::lzma_options_lzma = unsafe { std::mem::zeroed() };
        // No match reaches further back than the block's start: a dictionary of the
        // block's length (liblzma's least, 4 KiB, for short ones) suffices.
        opts.dict_size = (raw_len as u32).clamp(4096, DICT);
        opts.lc = u32::from(props % 9);
        opts.lp = u32::from(props / 9 % 5);
        opts.pb = u32::from(props / 45);
        // One spare byte: a block longer than announced fills it and is refused.
        let (ret, out) = self
            .run(lzma_sys::lzma_raw_decoder, &mut opts, bytes, raw_len + 1)
            .ok_or_else(|| format!("LZMA block has invalid properties {props}"))?;
        match ret {
            lzma_sys::LZMA_STREAM_END => Ok(out),
            lzma_sys::LZMA_OK | lzma_sys::LZMA_BUF_ERROR => {
                Err("LZMA block is truncated or too long".into())
            }
            _ => Err("LZMA block does not decode (corrupt data)".into()),
        }
    }
}

impl Drop for RawLzma {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by `new` (ending a never-used stream is
        // allowed) and is not used again.
        unsafe { lzma_sys::lzma_end(&mut *self.0) }
    }
}

impl RawLzma {
    /// Codes `raw` as raw LZMA with an end marker, `preset` with `(lc, lp, pb)` and a
    /// dictionary of `dict` bytes; `None` when the result would exceed `limit` bytes
    /// (coding stops there). Re-initialised for each block, liblzma keeps the match
    /// finder's tables of the same size instead of allocating them anew.
    fn encode(
        &mut self,
        raw: &[u8],
        preset: u32,
        (lc, lp, pb): (u32, u32, u32),
        dict: u32,
        limit: usize,
    ) -> Option<Vec<u8>> {
        // SAFETY: an all-zero `lzma_options_lzma` is plain integers and null pointers;
        // `lzma_lzma_preset` fills it (it returns true on an unknown preset).
        let mut opts: lzma_sys::lzma_options_lzma = unsafe { std::mem::zeroed() };
        if unsafe { lzma_sys::lzma_lzma_preset(&mut opts, preset) } != 0 {
            return None;
        }
        (opts.lc, opts.lp, opts.pb, opts.dict_size) = (lc, lp, pb, dict);
        let (ret, out) = self.run(lzma_sys::lzma_raw_encoder, &mut opts, raw, limit)?;
        (ret == lzma_sys::LZMA_STREAM_END).then_some(out)
    }

    /// Sets the stream up with `init` (the raw encoder or decoder) for LZMA1 with
    /// `opts`, and codes `input` to at most `cap` bytes in one call: what liblzma
    /// returned and what it wrote, or `None` when it refused the options.
    fn run(
        &mut self,
        init: unsafe extern "C" fn(
            *mut lzma_sys::lzma_stream,
            *const lzma_sys::lzma_filter,
        ) -> lzma_sys::lzma_ret,
        opts: &mut lzma_sys::lzma_options_lzma,
        input: &[u8],
        cap: usize,
    ) -> Option<(lzma_sys::lzma_ret, Vec<u8>)> {
        let filters = [
            lzma_sys::lzma_filter {
                id: lzma_sys::LZMA_FILTER_LZMA1,
                options: (opts as *mut lzma_sys::lzma_options_lzma).cast(),
            },
            lzma_sys::lzma_filter {
                id: lzma_sys::LZMA_VLI_UNKNOWN,
                options: std::ptr::null_mut(),
            },
        ];
        let strm = &mut *self.0;
        // SAFETY: `strm` is an initialised stream, `filters` a terminated chain whose
        // options outlive the call (liblzma copies what it keeps).
        if unsafe { init(strm, filters.as_ptr()) } != lzma_sys::LZMA_OK {
            return None;
        }
        let mut out: Vec<u8> = Vec::with_capacity(cap);
        strm.next_in = input.as_ptr();
        strm.avail_in = input.len();
        strm.next_out = out.as_mut_ptr();
        strm.avail_out = cap;
        // SAFETY: the input and output pointers cover `input` and `out`'s capacity.
        let ret = unsafe { lzma_sys::lzma_code(strm, lzma_sys::LZMA_FINISH) };
        let written = cap - strm.avail_out;
        // SAFETY: liblzma wrote `written` bytes at the start of `out`.
        unsafe { out.set_len(written) };
        strm.next_in = std::ptr::null();
        strm.avail_in = 0;
        strm.next_out = std::ptr::null_mut();
        strm.avail_out = 0;
        Some((ret, out))
    }
}

thread_local! {
    static LZMA: std::cell::RefCell<Option<RawLzma>> = const { std::cell::RefCell::new(None) };
    /// The encoder's own stream (a thread may code and decode in turn).
    static LZMA_ENCODER: std::cell::RefCell<Option<RawLzma>> =
        const { std::cell::RefCell::new(None) };
}

fn unlzma(props: u8, bytes: &[u8], raw_len: usize) -> std::result::Result<Vec<u8>, String> {
    LZMA.with(|cell| {
        cell.borrow_mut()
            .get_or_insert_with(RawLzma::new)
            .decode(props, bytes, raw_len)
    })
}

/// Decodes a block of exactly `raw_len` bytes; `at` is where it sits in its file. A
/// stored block is returned without a copy.
pub fn unpack(codec: u8, bytes: &[u8], raw_len: usize, at: usize) -> Result<Cow<'_, [u8]>> {
    let out = unpack_within(codec, bytes, raw_len, at)?;
    if out.len() != raw_len {
        return Err(CoreError::corrupt(
            at,
            format!(
                "block decodes to {} bytes, its index says {raw_len}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// Decodes a block of at most `max_len` bytes (for indexes that do not store the raw
/// length); `at` is where it sits in its file.
pub fn unpack_within(codec: u8, bytes: &[u8], max_len: usize, at: usize) -> Result<Cow<'_, [u8]>> {
    let bad = |why: String| CoreError::corrupt(at, why);
    if max_len > MAX_BLOCK {
        return Err(bad(format!(
            "block of {max_len} bytes, more than {MAX_BLOCK}"
        )));
    }
    let out = match codec {
        CODEC_STORED => Cow::Borrowed(bytes),
        CODEC_ZSTD => Cow::Owned(
            unzstd(bytes, max_len).map_err(|e| bad(format!("zstd block does not decode: {e}")))?,
        ),
        p if p - CODEC_LZMA < 225 => {
            Cow::Owned(unlzma(p - CODEC_LZMA, bytes, max_len).map_err(bad)?)
        }
        other => return Err(bad(format!("unknown block codec {other}"))),
    };
    if out.len() > max_len {
        return Err(bad(format!(
            "block decodes to {} bytes, more than {max_len}",
            out.len()
        )));
    }
    Ok(out)
}

/// A section block's checksum: CRC32C of its codec byte followed by its stored bytes
/// (the codec byte chooses how the bytes decode, so it is covered too).
fn block_crc(codec: u8, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&[codec]), bytes)
}

/// Appends `raw` as a *section*: any length, cut into blocks of at most
/// [`MAX_BLOCK`] bytes each coded on its own — `uvar raw_len, uvar blocks`, per block
/// `u8 codec, uvar raw_len, uvar stored_len, u32le CRC32C of the codec byte and the
/// stored bytes`, then
/// the blocks' stored bytes.
pub fn put_section(raw: &[u8], effort: Effort, out: &mut Vec<u8>) {
    let blocks: Vec<(usize, Packed)> = raw
        .chunks(MAX_BLOCK)
        .map(|chunk| (chunk.len(), pack(chunk, effort)))
        .collect();
    crate::codec::put_uvarint(out, raw.len() as u64);
    crate::codec::put_uvarint(out, blocks.len() as u64);
    for (len, p) in &blocks {
        out.push(p.codec);
        crate::codec::put_uvarint(out, *len as u64);
        crate::codec::put_uvarint(out, p.bytes.len() as u64);
        out.extend_from_slice(&block_crc(p.codec, &p.bytes).to_le_bytes());
    }
    for (_, p) in &blocks {
        out.extend_from_slice(&p.bytes);
    }
}

/// Payloads shorter than this are never coded: a section's own header (at least 9
/// bytes) and a codec's framing cost more than it can win on them.
pub const MIN_CODED: usize = 48;

/// `raw` as a section ([`put_section`]) when that is shorter than `raw` itself, else
/// `None` (then the caller keeps its plain form): how the container's index records
/// and the pattern map use the block coder only where it makes them smaller.
pub fn section_if_smaller(raw: &[u8], effort: Effort) -> Option<Vec<u8>> {
    if raw.len() < MIN_CODED || effort == Effort::Stored {
        return None;
    }
    let mut out = Vec::new();
    put_section(raw, effort, &mut out);
    (out.len() < raw.len()).then_some(out)
}

/// Reads a section written by [`put_section`]; `what` names it in errors.
pub fn get_section(c: &mut crate::codec::Cursor, what: &str) -> Result<Vec<u8>> {
    let at = c.position();
    let raw_len = c.uvarint()?;
    // A block entry takes at least 7 bytes.
    let n = c.count(c.remaining() / 7, "block")?;
    if raw_len > n as u64 * MAX_BLOCK as u64 {
        return Err(CoreError::corrupt(
            at,
            format!("{what}: {raw_len} bytes cannot fit {n} blocks"),
        ));
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let codec = c.u8()?;
        let raw = c.uvarint()?.min(MAX_BLOCK as u64 + 1) as usize;
        let stored = c.count(c.remaining(), "stored byte")?;
        let crc = c.u32_le()?;
        entries.push((codec, raw, stored, crc));
    }
    let blocks_raw: u64 = entries.iter().map(|e| e.1 as u64).sum();
    if blocks_raw != raw_len {
        return Err(CoreError::corrupt(
            at,
            format!("{what}: blocks announce {blocks_raw} bytes, the section {raw_len}"),
        ));
    }
    // Reserved from what is present, not from what the input announces: the output
    // grows as blocks really decode.
    let mut out =
        Vec::with_capacity(raw_len.min(MAX_BLOCK as u64).min(c.remaining() as u64) as usize);
    for (codec, raw, stored, crc) in entries {
        let at = c.position();
        let bytes = c.take(stored)?;
        // Sections written before the codec byte was covered checksum the stored
        // bytes alone; for a section written since, that older form matches only by a
        // 2^-32 chance, so a damaged codec byte is caught.
        if block_crc(codec, bytes) != crc && crate::codec::crc32c(bytes) != crc {
            return Err(CoreError::corrupt(at, format!("{what}: checksum mismatch")));
        }
        out.extend_from_slice(&unpack(codec, bytes, raw, at)?);
    }
    if out.len() as u64 != raw_len {
        return Err(CoreError::corrupt(
            at,
            format!(
                "{what}: blocks hold {} bytes, {raw_len} announced",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// The codec's name, for reports.
pub fn codec_name(codec: u8) -> &'static str {
    match codec {
        CODEC_STORED => "stored",
        CODEC_ZSTD => "zstd",
        _ => "lzma",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_refuse_damage() {
        let varints: Vec<u8> = (0..20_000u32)
            .flat_map(|i| [(i % 7) as u8, 3, 0x81, 1])
            .collect();
        for raw in [&b""[..], b"x", &varints[..MAX_BLOCK]] {
            let p = pack(raw, Effort::Best);
            assert!(p.bytes.len() <= raw.len());
            assert_eq!(unpack(p.codec, &p.bytes, raw.len(), 0).unwrap(), raw);
            if !raw.is_empty() {
                assert!(unpack(p.codec, &p.bytes, raw.len() - 1, 0).is_err());
            }
            assert!(unpack(p.codec, &p.bytes, raw.len() + 1, 0).is_err());
        }
        let p = pack(&varints[..5000], Effort::Best);
        assert_ne!(p.codec, CODEC_STORED);
        for cut in 0..p.bytes.len() {
            assert!(unpack(p.codec, &p.bytes[..cut], 5000, 0).is_err());
        }
        for at in 0..p.bytes.len() {
            let mut bad = p.bytes.clone();
            bad[at] ^= 0x5a;
            if let Ok(out) = unpack(p.codec, &bad, 5000, 0) {
                assert_eq!(out.len(), 5000);
            }
        }
        assert!(unpack(250, b"", 0, 0).is_err());
    }

    /// The per-thread zstd context stays usable after a block that fails.
    #[test]
    fn zstd_context_survives_damage() {
        let raw: Vec<u8> = (0..3000u32).flat_map(|i| (i % 50).to_le_bytes()).collect();
        let z = zstd::bulk::compress(&raw, ZSTD_LEVEL).unwrap();
        let mut bad = z.clone();
        bad[z.len() / 2] ^= 0xff;
        let _ = unpack(CODEC_ZSTD, &bad, raw.len(), 0);
        assert!(unpack(CODEC_ZSTD, &z[..z.len() - 1], raw.len(), 0).is_err());
        assert!(unpack(CODEC_ZSTD, &z, raw.len() - 1, 0).is_err());
        assert_eq!(&*unpack(CODEC_ZSTD, &z, raw.len(), 0).unwrap(), &raw[..]);
    }
}
