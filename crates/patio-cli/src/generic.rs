//! Generic compressors as baselines for patio's encodings: zlib, bz2, xz (and xz
//! `-9e`), zstd, and the 16-byte request records they are given — per stream in key
//! order or all requests in start-time order, with offsets as they are or as the
//! difference from the same stream's previous offset, as records (offset, length) or
//! as columns (every offset, then every length).

use anyhow::Result;
use patio_core::trace::Trace;
use std::io::Write;

/// zlib at `level` (0–9).
pub fn zlib(data: &[u8], level: u32) -> Result<Vec<u8>> {
    let mut e = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(level),
    );
    e.write_all(data)?;
    Ok(e.finish()?)
}

/// bzip2 at `level` (1–9).
pub fn bz2(data: &[u8], level: u32) -> Result<Vec<u8>> {
    let mut e = bzip2::write::BzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        bzip2::Compression::new(level),
    );
    e.write_all(data)?;
    Ok(e.finish()?)
}

/// xz (LZMA2) at `level`, as the `xz` tool would write it; `extreme` is `-e`.
pub fn xz(data: &[u8], level: u32, extreme: bool) -> Result<Vec<u8>> {
    let preset = level | if extreme { 0x8000_0000 } else { 0 };
    let stream = xz2::stream::Stream::new_easy_encoder(preset, xz2::stream::Check::Crc64)?;
    let mut e = xz2::write::XzEncoder::new_stream(Vec::with_capacity(data.len() / 4), stream);
    e.write_all(data)?;
    Ok(e.finish()?)
}

/// `xz -d` in process as a benchmark's baseline: liblzma's stream decoder writing
/// straight into the output vector (no intermediate buffer), kept across calls and
/// re-initialised for each, so liblzma keeps its allocations (the dictionary, the
/// decoder state) as patio's block decoders keep theirs per thread.
pub struct Unxz(Box<lzma_sys::lzma_stream>);

impl Unxz {
    pub fn new() -> Self {
        // SAFETY: an all-zero `lzma_stream` is `LZMA_STREAM_INIT`.
        Unxz(Box::new(unsafe { std::mem::zeroed() }))
    }

    /// Decodes one `.xz` stream.
    pub fn decode(&mut self, data: &[u8]) -> Result<Vec<u8>> {
        let strm = &mut *self.0;
        // SAFETY: `strm` is an initialised stream.
        let ret = unsafe { lzma_sys::lzma_stream_decoder(strm, u64::MAX, 0) };
        anyhow::ensure!(ret == lzma_sys::LZMA_OK, "xz decoder: error {ret}");
        let mut out: Vec<u8> = Vec::with_capacity(data.len() * 4);
        strm.next_in = data.as_ptr();
        strm.avail_in = data.len();
        let result = loop {
            let len = out.len();
            let room = out.capacity() - len;
            // SAFETY: `len <= capacity`: the pointer stays inside `out`'s allocation.
            strm.next_out = unsafe { out.as_mut_ptr().add(len) };
            strm.avail_out = room;
            // SAFETY: input and output pointers cover `data` and `out`'s spare room.
            let ret = unsafe { lzma_sys::lzma_code(strm, lzma_sys::LZMA_FINISH) };
            // SAFETY: liblzma wrote `room - avail_out` bytes after `len`.
            unsafe { out.set_len(len + room - strm.avail_out) };
            match ret {
                lzma_sys::LZMA_STREAM_END => break Ok(()),
                lzma_sys::LZMA_OK | lzma_sys::LZMA_BUF_ERROR if strm.avail_out == 0 => {
                    out.reserve(out.capacity());
                }
                lzma_sys::LZMA_OK | lzma_sys::LZMA_BUF_ERROR => {
                    break Err(anyhow::anyhow!("xz data ends before its stream does"))
                }
                e => break Err(anyhow::anyhow!("xz data does not decode (error {e})")),
            }
        };
        strm.next_in = std::ptr::null();
        strm.avail_in = 0;
        strm.next_out = std::ptr::null_mut();
        strm.avail_out = 0;
        result.map(|()| out)
    }
}

impl Default for Unxz {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Unxz {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by `new` and is not used again.
        unsafe { lzma_sys::lzma_end(&mut *self.0) }
    }
}

/// How request records are laid out for a generic compressor.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// All requests in start-time order (otherwise stream after stream, in key order).
    pub start_order: bool,
    /// Offsets as the difference from the same stream's previous offset.
    pub delta: bool,
    /// Column order: every offset, then every length (otherwise one record after the
    /// other).
    pub columns: bool,
}

impl Layout {
    /// Every layout: record and column order, each with and without deltas, in key
    /// and in start order.
    pub const ALL: [Layout; 8] = {
        let mut all = [Layout {
            start_order: false,
            delta: false,
            columns: false,
        }; 8];
        let mut i = 0;
        while i < 8 {
            all[i] = Layout {
                start_order: i & 2 != 0,
                delta: i & 1 != 0,
                columns: i & 4 != 0,
            };
            i += 1;
        }
        all
    };

    pub fn name(&self) -> String {
        let what = if self.columns { "columns" } else { "records" };
        let delta = if self.delta { "delta " } else { "" };
        let order = if self.start_order {
            " in start order"
        } else {
            ""
        };
        format!("{delta}{what}{order}")
    }
}

/// 16 bytes per request: offset (or its delta) and length, little-endian; one record
/// after the other, or every offset and then every length.
pub fn records(trace: &Trace, layout: Layout) -> Vec<u8> {
    let mut rows: Vec<(f64, usize, u64, u64)> = Vec::with_capacity(trace.requests());
    for s in &trace.streams {
        let mut prev = 0u64;
        for (i, (&o, &l)) in s.offsets.iter().zip(&s.lengths).enumerate() {
            let o_out = if layout.delta {
                o.wrapping_sub(prev)
            } else {
                o
            };
            prev = o;
            rows.push((
                s.starts.get(i).copied().unwrap_or(0.0),
                rows.len(),
                o_out,
                l,
            ));
        }
    }
    if layout.start_order {
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    }
    let mut out = Vec::with_capacity(rows.len() * 16);
    if layout.columns {
        out.extend(rows.iter().flat_map(|r| r.2.to_le_bytes()));
        out.extend(rows.iter().flat_map(|r| r.3.to_le_bytes()));
    } else {
        for (_, _, o, l) in rows {
            out.extend_from_slice(&o.to_le_bytes());
            out.extend_from_slice(&l.to_le_bytes());
        }
    }
    out
}

/// The generic coders `patio analyze` compares against: name and compressor.
pub type Coder = (&'static str, fn(&[u8]) -> Result<Vec<u8>>);

pub const CODERS: [Coder; 4] = [
    ("zlib -9", |d| zlib(d, 9)),
    ("bz2 -9", |d| bz2(d, 9)),
    ("xz -9", |d| xz(d, 9, false)),
    ("xz -9e", |d| xz(d, 9, true)),
];

/// Compressed size of every coder on every layout: `(coder, layout, bytes)`.
pub fn all_variants(trace: &Trace) -> Result<Vec<(&'static str, Layout, usize)>> {
    let mut out = Vec::new();
    for layout in Layout::ALL {
        let data = records(trace, layout);
        for (name, coder) in CODERS {
            out.push((name, layout, coder(&data)?.len()));
        }
    }
    Ok(out)
}
