//! `patio bench detect`: throughput of pattern encoding to bytes (sliding-window
//! detector plus pattern tree, `PatternSeq::build`, then `seqcodec::encode_seq`, one
//! core) on the logical offsets of the `bench lookup` inputs, side by side with zstd
//! (level 3) and xz (level 6) compressing the same offsets as 8-byte little-endian
//! integers to bytes, and the encoded size each produces. Detection alone is timed
//! too, to show what the serialization adds.

use super::workloads::lookup_inputs;
use super::{alternate, grouped, human_bytes, print_json, progress, sig3, time, Table};
use anyhow::{bail, Context, Result};
use patio_core::seqcodec::encode_seq;
use patio_core::{Detector, PatternSeq};
use serde::Serialize;
use std::hint::black_box;
use std::io::Write;

const ZSTD_LEVEL: i32 = 3;
const XZ_LEVEL: u32 = 6;

#[derive(Serialize)]
struct Case {
    name: &'static str,
    entries: u64,
    /// Detection and encoding to bytes.
    entries_per_s: f64,
    /// Detection only (`PatternSeq::build`), no bytes produced.
    detect_entries_per_s: f64,
    zstd_entries_per_s: f64,
    xz_entries_per_s: f64,
    pattern_bytes: u64,
    zstd_bytes: u64,
    xz_bytes: u64,
}

/// xz (LZMA2) compression of `data` at `level`, as the `xz` tool would write it.
pub fn xz(data: &[u8], level: u32) -> Result<Vec<u8>> {
    let mut enc = xz2::write::XzEncoder::new(Vec::with_capacity(data.len() / 4), level);
    enc.write_all(data)?;
    Ok(enc.finish()?)
}

pub fn run(entries: u64, window: usize, reps: usize, json: bool) -> Result<()> {
    let reps = reps.max(1);
    let detector = Detector::new(window);
    let inputs = lookup_inputs(entries as usize);
    let bar = progress((inputs.len() * 4 * reps) as u64, json);
    let mut cases = Vec::new();
    let mut coverage = Vec::new();
    for input in &inputs {
        bar.set_message(input.name);
        let xs: Vec<i64> = input.extents.iter().map(|e| e.logical as i64).collect();
        let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();

        let seq = PatternSeq::build(&xs, &detector);
        if seq.expand() != xs {
            bail!(
                "{}: PatternSeq::build(xs).expand() != xs (window {window})",
                input.name
            );
        }
        let pattern_bytes = encode_seq(&seq).len() as u64;
        coverage.push((seq.pieces().len(), seq.coverage()));
        drop(seq);

        let mut sizes = [0u64; 3];
        let medians = alternate(4, reps, |side| {
            let d = match side {
                0 => {
                    let (d, out) =
                        time(|| encode_seq(&PatternSeq::build(black_box(&xs), &detector)));
                    if out.len() as u64 != pattern_bytes {
                        bail!("{}: pattern encoding is not deterministic", input.name);
                    }
                    d
                }
                3 => {
                    let (d, seq) = time(|| PatternSeq::build(black_box(&xs), &detector));
                    black_box(&seq);
                    d
                }
                1 => {
                    let (d, out) = time(|| zstd::bulk::compress(black_box(&bytes), ZSTD_LEVEL));
                    sizes[1] = out.context("zstd")?.len() as u64;
                    d
                }
                _ => {
                    let (d, out) = time(|| xz(black_box(&bytes), XZ_LEVEL));
                    sizes[2] = out.context("xz")?.len() as u64;
                    d
                }
            };
            bar.inc(1);
            Ok(d)
        })?;
        let rate = |i: usize| entries as f64 / medians[i].as_secs_f64();
        cases.push(Case {
            name: input.name,
            entries,
            entries_per_s: rate(0),
            detect_entries_per_s: rate(3),
            zstd_entries_per_s: rate(1),
            xz_entries_per_s: rate(2),
            pattern_bytes,
            zstd_bytes: sizes[1],
            xz_bytes: sizes[2],
        });
    }
    bar.finish_and_clear();

    if json {
        return print_json(&cases);
    }
    let mut t = Table::new(
        format!(
            "bench detect: PatternSeq::build + encode_seq (window {window}) vs zstd-{ZSTD_LEVEL} and xz-{XZ_LEVEL} to bytes on {} offsets \
             (8 B each, {}), median of {reps}",
            grouped(entries),
            human_bytes(entries * 8)
        ),
        &[
            "case",
            "pieces",
            "coverage",
            "pattern Mentries/s",
            "detect only",
            "zstd Mentries/s",
            "xz Mentries/s",
            "pattern bytes",
            "zstd bytes",
            "xz bytes",
            "raw/pattern",
            "raw/zstd",
            "raw/xz",
        ],
    );
    for (c, (pieces, cov)) in cases.iter().zip(&coverage) {
        let raw = (c.entries * 8) as f64;
        t.row(vec![
            c.name.to_string(),
            grouped(*pieces as u64),
            format!("{:.1} %", cov * 100.0),
            format!("{:.2}", c.entries_per_s / 1e6),
            format!("{:.2}", c.detect_entries_per_s / 1e6),
            format!("{:.2}", c.zstd_entries_per_s / 1e6),
            format!("{:.2}", c.xz_entries_per_s / 1e6),
            grouped(c.pattern_bytes),
            grouped(c.zstd_bytes),
            grouped(c.xz_bytes),
            sig3(raw / c.pattern_bytes as f64),
            sig3(raw / c.zstd_bytes as f64),
            sig3(raw / c.xz_bytes as f64),
        ]);
    }
    t.note(
        "offsets in input order (the random case is shuffled, as written); every column produces bytes \
         (pattern: detection + seqcodec::encode_seq; detect only: PatternSeq::build without encoding).",
    );
    t.print()
}
