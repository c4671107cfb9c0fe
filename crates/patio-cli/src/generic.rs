//! Generic compressors as baselines for patio's encodings: zlib, bz2, xz (and xz
//! `-9e`), zstd, and the 16-byte request records they are given — per stream in key
//! order or all requests in start-time order, with offsets as they are or as the
//! difference from the same stream's previous offset.

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

/// `xz -d`, in process: liblzma's stream decoder writing straight into the output
/// vector (no intermediate buffer), which grows as it fills.
pub fn unxz(data: &[u8]) -> Result<Vec<u8>> {
    let mut stream = xz2::stream::Stream::new_stream_decoder(u64::MAX, 0)?;
    let mut out = Vec::with_capacity(data.len() * 4);
    loop {
        let read = stream.total_in() as usize;
        match stream.process_vec(&data[read..], &mut out, xz2::stream::Action::Finish)? {
            xz2::stream::Status::StreamEnd => return Ok(out),
            _ if out.len() < out.capacity() => {
                anyhow::bail!("xz data ends before its stream does")
            }
            _ => out.reserve(out.capacity()),
        }
    }
}

/// How request records are laid out for a generic compressor.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// All requests in start-time order (otherwise stream after stream, in key order).
    pub start_order: bool,
    /// Offsets as the difference from the same stream's previous offset.
    pub delta: bool,
}

impl Layout {
    pub const ALL: [Layout; 4] = [
        Layout {
            start_order: false,
            delta: false,
        },
        Layout {
            start_order: false,
            delta: true,
        },
        Layout {
            start_order: true,
            delta: false,
        },
        Layout {
            start_order: true,
            delta: true,
        },
    ];

    pub fn name(&self) -> &'static str {
        match (self.delta, self.start_order) {
            (false, false) => "records",
            (true, false) => "delta records",
            (false, true) => "records in start order",
            (true, true) => "delta records in start order",
        }
    }
}

/// 16 bytes per request: offset (or its delta) and length, little-endian.
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
    for (_, _, o, l) in rows {
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
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
