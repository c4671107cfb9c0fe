//! Entropy coding of independent blocks of at most [`MAX_BLOCK`] bytes: the last stage of
//! the stream-set and native-trace encodings (docs/FORMATS.md, "Block coder").
//!
//! Each block is coded on its own — a reader decodes any block without the others — by
//! the smallest of: stored as is, zstd (level 19), or LZMA with one of a few literal
//! context / position settings (varint payloads favour few context bits). The choice is
//! one byte, the *codec*:
//!
//! * `0` stored;
//! * `1` zstd frame;
//! * `2 + p` raw LZMA data with properties byte `p = (pb · 5 + lp) · 9 + lc`, a 64 KiB
//!   dictionary and an end marker: the 13-byte `.lzma` header is not stored, since the
//!   dictionary is fixed and the properties are in the codec byte.
//!
//! Decoding is bounded by the raw length the caller gives (from its block index): a
//! damaged block can neither allocate more nor decode to a different length unnoticed.

use crate::error::{CoreError, Result};

/// Largest raw block.
pub const MAX_BLOCK: usize = 1 << 16;

pub const CODEC_STORED: u8 = 0;
pub const CODEC_ZSTD: u8 = 1;
const CODEC_LZMA: u8 = 2;

/// LZMA dictionary: a block is never longer.
const DICT: u32 = MAX_BLOCK as u32;
/// `(lc, lp, pb)` settings tried per block.
const LZMA_SETTINGS: [(u32, u32, u32); 3] = [(1, 0, 0), (3, 0, 2), (0, 0, 0)];
const ZSTD_LEVEL: i32 = 19;
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

/// zstd level and liblzma preset of [`Effort::Fast`].
const FAST_ZSTD_LEVEL: i32 = 9;
const FAST_LZMA_PRESET: u32 = 6;

/// A block as written: its codec and its stored bytes.
pub struct Packed {
    pub codec: u8,
    pub bytes: Vec<u8>,
}

fn lzma(raw: &[u8], preset: u32, (lc, lp, pb): (u32, u32, u32)) -> Option<Vec<u8>> {
    let mut opts = xz2::stream::LzmaOptions::new_preset(preset).ok()?;
    opts.literal_context_bits(lc)
        .literal_position_bits(lp)
        .position_bits(pb)
        .dict_size(DICT);
    let mut stream = xz2::stream::Stream::new_lzma_encoder(&opts).ok()?;
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 2 + 64);
    match stream.process_vec(raw, &mut out, xz2::stream::Action::Finish) {
        Ok(xz2::stream::Status::StreamEnd) if out.len() >= 13 => Some(out.split_off(13)),
        _ => None,
    }
}

/// Codes one block (at most [`MAX_BLOCK`] bytes) in the smallest form `effort` allows.
pub fn pack(raw: &[u8], effort: Effort) -> Packed {
    assert!(raw.len() <= MAX_BLOCK, "block of {} bytes", raw.len());
    let mut best = Packed {
        codec: CODEC_STORED,
        bytes: raw.to_vec(),
    };
    if effort == Effort::Stored || raw.is_empty() {
        return best;
    }
    let mut consider = |codec: u8, bytes: Vec<u8>| {
        if bytes.len() < best.bytes.len() {
            best = Packed { codec, bytes };
        }
    };
    let (zstd_level, preset, settings) = match effort {
        Effort::Fast => (FAST_ZSTD_LEVEL, FAST_LZMA_PRESET, &LZMA_SETTINGS[..1]),
        _ => (ZSTD_LEVEL, LZMA_PRESET, &LZMA_SETTINGS[..]),
    };
    if let Ok(z) = zstd::bulk::compress(raw, zstd_level) {
        consider(CODEC_ZSTD, z);
    }
    for &(lc, lp, pb) in settings {
        if let Some(bytes) = lzma(raw, preset, (lc, lp, pb)) {
            consider(CODEC_LZMA + ((pb * 5 + lp) * 9 + lc) as u8, bytes);
        }
    }
    best
}

/// Decodes a block of exactly `raw_len` bytes; `at` is where it sits in its file.
pub fn unpack(codec: u8, bytes: &[u8], raw_len: usize, at: usize) -> Result<Vec<u8>> {
    let bad = |why: String| CoreError::corrupt(at, why);
    if raw_len > MAX_BLOCK {
        return Err(bad(format!(
            "block of {raw_len} bytes, more than {MAX_BLOCK}"
        )));
    }
    let out = match codec {
        CODEC_STORED => bytes.to_vec(),
        CODEC_ZSTD => zstd::bulk::decompress(bytes, raw_len)
            .map_err(|e| bad(format!("zstd block does not decode: {e}")))?,
        p if p - CODEC_LZMA < 225 => {
            let mut input = Vec::with_capacity(13 + bytes.len());
            input.push(p - CODEC_LZMA);
            input.extend_from_slice(&DICT.to_le_bytes());
            input.extend_from_slice(&u64::MAX.to_le_bytes());
            input.extend_from_slice(bytes);
            let mut stream = xz2::stream::Stream::new_lzma_decoder(1 << 24)
                .map_err(|e| bad(format!("LZMA decoder: {e}")))?;
            // One spare byte: a block longer than announced fills it and is refused.
            let mut out = Vec::with_capacity(raw_len + 1);
            match stream.process_vec(&input, &mut out, xz2::stream::Action::Finish) {
                Ok(xz2::stream::Status::StreamEnd) => out,
                Ok(_) => return Err(bad("LZMA block is truncated or too long".into())),
                Err(e) => return Err(bad(format!("LZMA block does not decode: {e}"))),
            }
        }
        other => return Err(bad(format!("unknown block codec {other}"))),
    };
    if out.len() != raw_len {
        return Err(bad(format!(
            "block decodes to {} bytes, its index says {raw_len}",
            out.len()
        )));
    }
    Ok(out)
}

/// Appends `raw` as a *section*: any length, cut into blocks of at most
/// [`MAX_BLOCK`] bytes each coded on its own — `uvar raw_len, uvar blocks`, per block
/// `u8 codec, uvar raw_len, uvar stored_len, u32le CRC32C of the stored bytes`, then
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
        out.extend_from_slice(&crate::codec::crc32c(&p.bytes).to_le_bytes());
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
    let mut out = Vec::with_capacity((raw_len as usize).min(c.remaining()));
    for (codec, raw, stored, crc) in entries {
        let at = c.position();
        let bytes = c.take(stored)?;
        if crate::codec::crc32c(bytes) != crc {
            return Err(CoreError::corrupt(at, format!("{what}: checksum mismatch")));
        }
        out.extend(unpack(codec, bytes, raw, at)?);
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
}
