//! `patio analyze`: per-stream pattern report of a trace, its size in the stream-set
//! encoding, and generic compressors on the same 16-byte records side by side (every
//! coder of `generic.rs` on every layout — record and column order, with and without
//! delta coding, in key and in start order — the best of them named).

use crate::generic;
use crate::load::load_trace_shown;
use anyhow::{Context, Result};
use patio_core::analysis::{analyze_stream, StreamAnalysis};
use patio_core::blockset;
use patio_core::trace::Trace;
use patio_core::Detector;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Trace to analyze: a Darshan DXT log (.darshan), a patio CSV trace (.csv) or a
    /// native patio trace (.ptrace).
    trace: PathBuf,
    /// Print the report as JSON: {"streams": [...], "totals": {...}}.
    #[arg(long)]
    json: bool,
    /// Draw offset against request index per stream, coloured by pattern segment.
    #[arg(long, value_name = "OUT.png")]
    plot: Option<PathBuf>,
    /// Detector search window (longest repeating delta vector found directly).
    #[arg(long, default_value_t = patio_core::detect::DEFAULT_WINDOW)]
    window: usize,
    /// Streams listed in the text report (all are in --json).
    #[arg(long, default_value_t = 25)]
    top: usize,
}

#[derive(Serialize)]
struct StreamRow {
    module: String,
    file: String,
    rank: i64,
    op: &'static str,
    requests: u64,
    bytes: u64,
    kind: &'static str,
    signature: String,
    length_signature: String,
    coverage: f64,
    pieces: usize,
}

#[derive(Serialize)]
struct Totals {
    streams: usize,
    requests: u64,
    raw_bytes: u64,
    encoded_bytes: u64,
    ratio: f64,
    zlib_ratio: f64,
    bz2_ratio: f64,
    xz_ratio: f64,
    xz9e_ratio: f64,
    delta_xz_ratio: f64,
    /// The best generic coder on the best record layout, and its name.
    best_generic_ratio: f64,
    best_generic: String,
    /// Every generic variant: "coder, layout" → ratio.
    generic: std::collections::BTreeMap<String, f64>,
    /// The generic coders' ratios in key order, per coder: records, delta records,
    /// columns, delta columns (what the text report prints).
    #[serde(skip)]
    generic_table: Vec<(&'static str, [f64; 4])>,
    blocks: usize,
    coverage: f64,
    kinds: std::collections::BTreeMap<&'static str, usize>,
}

#[derive(Serialize)]
struct Report {
    streams: Vec<StreamRow>,
    totals: Totals,
}

/// Requests above which a progress bar is worth showing.
const PROGRESS_THRESHOLD: usize = 200_000;

pub fn run(args: Args) -> Result<()> {
    if let Some(out) = &args.plot {
        check_plot_target(out)?;
    }
    let trace = load_trace_shown(&args.trace, args.json)?;
    let detector = Detector::new(args.window);
    let hidden = trace.requests() <= PROGRESS_THRESHOLD || args.json;
    let bar = crate::report::progress(trace.requests() as u64, hidden);
    bar.set_message("requests analyzed");
    let analyses: Vec<StreamAnalysis> = trace
        .streams
        .iter()
        .map(|s| {
            let a = analyze_stream(&s.offsets, &s.lengths, &detector);
            bar.inc(s.len() as u64);
            a
        })
        .collect();
    bar.finish_and_clear();
    let report = build_report(&trace, &analyses, &detector)?;
    if let Some(out) = &args.plot {
        plot(&trace, &analyses, &args.trace, out)?;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print_text(&mut out, &report, args.top)?;
        if let Some(p) = &args.plot {
            writeln!(out, "plot written to {}", p.display())?;
        }
    }
    Ok(())
}

fn build_report(trace: &Trace, analyses: &[StreamAnalysis], detector: &Detector) -> Result<Report> {
    let mut kinds = std::collections::BTreeMap::new();
    let streams: Vec<StreamRow> = trace
        .streams
        .iter()
        .zip(analyses)
        .map(|(s, a)| {
            *kinds.entry(a.kind.as_str()).or_insert(0) += 1;
            StreamRow {
                module: s.key.module.clone(),
                file: s.key.file.clone(),
                rank: s.key.rank,
                op: s.key.op.as_str(),
                requests: a.requests,
                bytes: s.lengths.iter().sum(),
                kind: a.kind.as_str(),
                signature: a.signature.clone(),
                length_signature: a.length_signature.clone(),
                coverage: a.coverage,
                pieces: a.offsets.pieces().len(),
            }
        })
        .collect();
    let requests = trace.requests() as u64;
    let raw_bytes = requests * 16;
    let columns: Vec<(&[u64], &[u64])> = trace
        .streams
        .iter()
        .map(|s| (s.offsets.as_slice(), s.lengths.as_slice()))
        .collect();
    let encoded = blockset::encode(&columns, detector, &blockset::Options::default());
    let encoded_bytes = encoded.len() as u64;
    let blocks = blockset::StreamSet::open(&encoded)
        .context("the stream set just encoded does not open")?
        .blocks()
        .len();
    let ratio_of = |compressed: usize| {
        if compressed == 0 {
            0.0
        } else {
            raw_bytes as f64 / compressed as f64
        }
    };
    let variants = generic::all_variants(trace)?;
    let size_of = |coder: &str, delta: bool| {
        variants
            .iter()
            .find(|(c, l, _)| *c == coder && l.delta == delta && !l.start_order && !l.columns)
            .map_or(0, |v| v.2)
    };
    let best = variants
        .iter()
        .min_by_key(|v| v.2)
        .expect("generic variants");
    let covered: f64 = analyses
        .iter()
        .map(|a| a.coverage * a.requests as f64)
        .sum();
    Ok(Report {
        streams,
        totals: Totals {
            streams: trace.streams.len(),
            requests,
            raw_bytes,
            encoded_bytes,
            ratio: ratio_of(encoded_bytes as usize),
            zlib_ratio: ratio_of(size_of("zlib -9", false)),
            bz2_ratio: ratio_of(size_of("bz2 -9", false)),
            xz_ratio: ratio_of(size_of("xz -9", false)),
            xz9e_ratio: ratio_of(size_of("xz -9e", false)),
            delta_xz_ratio: ratio_of(size_of("xz -9", true)),
            best_generic_ratio: ratio_of(best.2),
            best_generic: format!("{}, {}", best.0, best.1.name()),
            generic: variants
                .iter()
                .map(|(c, l, n)| (format!("{c}, {}", l.name()), ratio_of(*n)))
                .collect(),
            generic_table: generic::CODERS
                .iter()
                .map(|&(coder, _)| {
                    let mut row = [0.0; 4];
                    for (c, l, n) in &variants {
                        if *c == coder && !l.start_order {
                            row[usize::from(l.columns) * 2 + usize::from(l.delta)] = ratio_of(*n);
                        }
                    }
                    (coder, row)
                })
                .collect(),
            blocks,
            coverage: if requests == 0 {
                1.0
            } else {
                covered / requests as f64
            },
            kinds,
        },
    })
}

fn print_text(out: &mut impl Write, r: &Report, top: usize) -> Result<()> {
    let t = &r.totals;
    writeln!(out, "{} streams, {} requests", t.streams, t.requests)?;
    let kinds: Vec<String> = t.kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    writeln!(out, "stream kinds: {}", kinds.join(", "))?;
    writeln!(out)?;
    let mut order: Vec<&StreamRow> = r.streams.iter().collect();
    order.sort_by_key(|s| std::cmp::Reverse(s.requests));
    writeln!(
        out,
        "{:<44} {:>8} {:<16} {:>6}  signature",
        "stream", "requests", "kind", "cover"
    )?;
    for s in order.iter().take(top) {
        let name = format!("{} r{} {} {}", s.module, s.rank, s.op, short(&s.file, 22));
        writeln!(
            out,
            "{:<44} {:>8} {:<16} {:>5.1}%  {}",
            name,
            s.requests,
            s.kind,
            s.coverage * 100.0,
            s.signature
        )?;
    }
    if order.len() > top {
        writeln!(
            out,
            "… {} more streams (all of them in --json)",
            order.len() - top
        )?;
    }
    writeln!(out)?;
    if t.requests == 0 {
        // Nothing to encode: no coverage and no compression ratio to speak of.
        writeln!(out, "no requests: nothing to encode or compare")?;
        return Ok(());
    }
    writeln!(
        out,
        "pattern coverage  {:>10.1}% of requests",
        t.coverage * 100.0
    )?;
    writeln!(
        out,
        "raw records       {:>10} bytes (16 per request)",
        t.raw_bytes
    )?;
    writeln!(
        out,
        "stream set        {:>10} bytes  ratio {:>8.1}x ({} blocks, random access per block)",
        t.encoded_bytes, t.ratio, t.blocks
    )?;
    writeln!(
        out,
        "generic coders, ratio  {:>13} {:>13} {:>13} {:>13}",
        "records", "delta records", "columns", "delta columns"
    )?;
    for (name, row) in &t.generic_table {
        writeln!(
            out,
            "{name:<22} {:>12.1}x {:>12.1}x {:>12.1}x {:>12.1}x",
            row[0], row[1], row[2], row[3]
        )?;
    }
    writeln!(
        out,
        "best generic      ratio {:>8.1}x ({}; of {} variants, start order in --json)",
        t.best_generic_ratio,
        t.best_generic,
        t.generic.len()
    )?;
    Ok(())
}

fn short(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= n {
        s.to_string()
    } else {
        format!(
            "…{}",
            chars[chars.len() - (n - 1)..].iter().collect::<String>()
        )
    }
}

#[derive(Serialize)]
struct PlotStream {
    key: String,
    offsets: Vec<u64>,
    segments: Vec<(u64, u64, &'static str)>,
}

#[derive(Serialize)]
struct PlotInput {
    title: String,
    streams: Vec<PlotStream>,
}

/// Refuses a plot path in a directory that does not exist (a mistyped directory is
/// an error, not a directory to create), before any work.
fn check_plot_target(out: &std::path::Path) -> Result<()> {
    match out.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) if !parent.is_dir() => anyhow::bail!(
            "--plot {}: no directory {}",
            out.display(),
            parent.display()
        ),
        _ => Ok(()),
    }
}

/// Writes the plot input as JSON and lets `patio.plot` (matplotlib) draw it.
fn plot(
    trace: &Trace,
    analyses: &[StreamAnalysis],
    source: &std::path::Path,
    out: &std::path::Path,
) -> Result<()> {
    let input = PlotInput {
        title: source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        streams: trace
            .streams
            .iter()
            .zip(analyses)
            .map(|(s, a)| PlotStream {
                key: s.key.to_string(),
                offsets: s.offsets.clone(),
                segments: a
                    .segments
                    .iter()
                    .map(|g| (g.start, g.end, g.kind.map_or("literal", |k| k.as_str())))
                    .collect(),
            })
            .collect(),
    };
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("plot.json");
    std::fs::write(&json, serde_json::to_vec(&input)?).context("cannot write the plot input")?;
    crate::python::run_helper(
        "plot",
        &["analyze".as_ref(), json.as_os_str(), out.as_os_str()],
    )
    .with_context(|| format!("cannot draw {}", out.display()))
}
