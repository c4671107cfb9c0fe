//! `patio bench traces`: the stream-set encoding on real traces against the generic
//! coders in one run — size (every coder on every record layout, the best named),
//! encoding and decoding speed against `xz -6` and `xz -d` on the same 16-byte
//! records, query time (one stream, the requests touching one offset) against
//! decompressing everything with xz, and an ablation: the size with each part of the
//! encoding turned off in turn.

use super::{alternate, cpu_time_per_call, grouped, print_json, sig3, Table};
use crate::generic::{self, Layout};
use crate::load::load_trace;
use anyhow::{bail, Context, Result};
use patio_core::blockset::{self, Options, StreamSet};
use patio_core::Detector;
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Traces to measure (default: every .darshan log in ../shared/traces).
    traces: Vec<PathBuf>,
    /// Runs of each timing (their median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Print {"cases": [...]} as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Case {
    name: String,
    streams: usize,
    requests: u64,
    raw_bytes: u64,
    encoded_bytes: u64,
    blocks: usize,
    ratio: f64,
    best_generic: String,
    best_generic_ratio: f64,
    generic: Vec<(String, f64)>,
    encode_mb_s: f64,
    xz6_mb_s: f64,
    decode_mb_s: f64,
    unxz_mb_s: f64,
    query_stream: usize,
    query_stream_us: f64,
    query_offset_us: f64,
    query_blocks: usize,
    xz_query_us: f64,
    ablation: Vec<(String, u64)>,
}

fn default_traces() -> Result<Vec<PathBuf>> {
    let dir = PathBuf::from("../shared/traces");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "darshan"))
        .collect();
    logs.sort();
    Ok(logs)
}

pub fn run(args: Args) -> Result<()> {
    let traces = if args.traces.is_empty() {
        default_traces()?
    } else {
        args.traces.clone()
    };
    let detector = Detector::default();
    let mut cases = Vec::new();
    for path in &traces {
        let trace = load_trace(path)?;
        let name = path
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned());
        let columns: Vec<(&[u64], &[u64])> = trace
            .streams
            .iter()
            .map(|s| (s.offsets.as_slice(), s.lengths.as_slice()))
            .collect();
        let encoded = blockset::encode(&columns, &detector, &Options::default());
        let set = StreamSet::open(&encoded)?;
        if set.decode_all()?
            != trace
                .streams
                .iter()
                .map(|s| (s.offsets.clone(), s.lengths.clone()))
                .collect::<Vec<_>>()
        {
            bail!("{name}: the stream set does not decode to the trace");
        }
        let raw = generic::records(&trace, Layout::ALL[0]);
        let xz6 = generic::xz(&raw, 6, false)?;
        let variants = generic::all_variants(&trace)?;
        let best = variants.iter().min_by_key(|v| v.2).expect("variants");
        // The longest stream, and the offset in the middle of its middle request.
        let k = (0..trace.streams.len())
            .max_by_key(|&k| trace.streams[k].len())
            .unwrap_or(0);
        let s = &trace.streams[k];
        let x = s.offsets[s.len() / 2] + s.lengths[s.len() / 2] / 2;
        let first = trace.streams[..k].iter().map(|s| s.len()).sum::<usize>();
        let mut blocks_for_query = 0;
        // Each side: CPU time per call, calls repeated for at least 20 ms per sample.
        let per_call = Duration::from_millis(20);
        let mut unxz = generic::Unxz::new();
        let t = alternate(7, args.reps, |side| {
            let timed = |f: &mut dyn FnMut() -> Result<usize>| -> Result<Duration> {
                let (d, out) = cpu_time_per_call(per_call, &mut *f);
                out?;
                Ok(d)
            };
            match side {
                0 => timed(&mut || {
                    Ok(blockset::encode(black_box(&columns), &detector, &Options::default()).len())
                }),
                1 => timed(&mut || Ok(generic::xz(black_box(&raw), 6, false)?.len())),
                2 => timed(&mut || {
                    Ok(StreamSet::open(black_box(&encoded))?
                        .decode_flat()?
                        .offsets
                        .len())
                }),
                3 => timed(&mut || Ok(unxz.decode(black_box(&xz6))?.len())),
                4 => timed(&mut || {
                    Ok(StreamSet::open(black_box(&encoded))?
                        .stream(k)?
                        .requests
                        .len())
                }),
                5 => timed(&mut || {
                    let a = StreamSet::open(black_box(&encoded))?.touching(k, x)?;
                    blocks_for_query = a.blocks_decoded;
                    Ok(a.requests.len())
                }),
                _ => timed(&mut || {
                    let all = unxz.decode(black_box(&xz6))?;
                    let part = &all[first * 16..(first + s.len()) * 16];
                    Ok(part
                        .chunks_exact(16)
                        .filter(|r| {
                            let o = u64::from_le_bytes(r[..8].try_into().unwrap());
                            let l = u64::from_le_bytes(r[8..].try_into().unwrap());
                            o <= x && x - o < l
                        })
                        .count())
                }),
            }
        })?;
        let mb_s = |i: usize| raw.len() as f64 / 1e6 / t[i].as_secs_f64();
        let us = |i: usize| t[i].as_secs_f64() * 1e6;
        let ablation = Options::ablations()
            .into_iter()
            .map(|(n, o)| {
                (
                    n.to_string(),
                    blockset::encode(&columns, &detector, &o).len() as u64,
                )
            })
            .collect();
        let raw_bytes = raw.len() as u64;
        cases.push(Case {
            name,
            streams: trace.streams.len(),
            requests: trace.requests() as u64,
            raw_bytes,
            encoded_bytes: encoded.len() as u64,
            blocks: set.blocks().len(),
            ratio: raw_bytes as f64 / encoded.len() as f64,
            best_generic: format!("{}, {}", best.0, best.1.name()),
            best_generic_ratio: raw_bytes as f64 / best.2 as f64,
            generic: variants
                .iter()
                .map(|(c, l, n)| (format!("{c}, {}", l.name()), raw_bytes as f64 / *n as f64))
                .collect(),
            encode_mb_s: mb_s(0),
            xz6_mb_s: mb_s(1),
            decode_mb_s: mb_s(2),
            unxz_mb_s: mb_s(3),
            query_stream: k,
            query_stream_us: us(4),
            query_offset_us: us(5),
            query_blocks: blocks_for_query,
            xz_query_us: us(6),
            ablation,
        });
    }
    if args.json {
        return print_json(&cases);
    }
    print_tables(&cases, args.reps)
}

fn print_tables(cases: &[Case], reps: usize) -> Result<()> {
    let mut t = Table::new(
        "bench traces: stream set vs the best generic coder (zlib-9, bz2-9, xz-9, xz-9e on 8 layouts: records and columns)",
        &["trace", "streams", "requests", "stream set B", "blocks", "ratio", "best generic", "ratio", "winner"],
    )
    .left_align(6);
    for c in cases {
        t.row(vec![
            c.name.clone(),
            grouped(c.streams as u64),
            grouped(c.requests),
            grouped(c.encoded_bytes),
            c.blocks.to_string(),
            sig3(c.ratio),
            c.best_generic.clone(),
            sig3(c.best_generic_ratio),
            if c.ratio >= c.best_generic_ratio {
                "stream set"
            } else {
                "generic"
            }
            .to_string(),
        ]);
    }
    t.note("ratio: 16 B per request over encoded bytes; every variant is in --json.");
    t.print()?;
    let mut t = Table::new(
        format!("bench traces: speed on the 16-byte records (MB/s of records) and query time, median of {reps}"),
        &["trace", "encode", "xz -6", "decode", "xz -d", "stream (µs)", "offset (µs)", "blocks", "xz -d + scan (µs)"],
    );
    for c in cases {
        t.row(vec![
            c.name.clone(),
            format!("{:.1}", c.encode_mb_s),
            format!("{:.1}", c.xz6_mb_s),
            format!("{:.1}", c.decode_mb_s),
            format!("{:.1}", c.unxz_mb_s),
            format!("{:.0}", c.query_stream_us),
            format!("{:.0}", c.query_offset_us),
            c.query_blocks.to_string(),
            format!("{:.0}", c.xz_query_us),
        ]);
    }
    t.note("CPU time of the benchmark thread per call, calls repeated for 20 ms per sample; xz in process (liblzma),");
    t.note("its decoder kept across calls as patio keeps its block decoders per thread.");
    t.note("encode: detection + blocks + entropy coding to bytes; decode: every stream's requests (copies written out)");
    t.note("into one offset and one length array, as xz -d gives one record buffer; queries on the longest stream,");
    t.note("from the encoded bytes (index opened each time); xz -d + scan: decompress the xz -6 records, scan the stream.");
    t.print()?;
    let names: Vec<String> = cases[0].ablation.iter().map(|(n, _)| n.clone()).collect();
    let mut headers = vec!["trace", "all on"];
    headers.extend(names.iter().map(String::as_str));
    let mut t = Table::new(
        "bench traces: ablation, encoded bytes with one part off",
        &headers,
    );
    for c in cases {
        let mut row = vec![c.name.clone(), grouped(c.encoded_bytes)];
        row.extend(c.ablation.iter().map(|(_, b)| grouped(*b)));
        t.row(row);
    }
    t.print()
}
