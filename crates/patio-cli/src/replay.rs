//! `patio replay`: replays the read requests of a trace against a data file through
//! the prefetch engine (patio-prefetch) with one policy, over the slow-store model,
//! and reports I/O time, total time and every counter. The slow-store and compute
//! options and the report's JSON are shared with `patio bench prefetch`.

use crate::counters::{aligned, CountersJson};
use crate::load::load_trace;
use crate::size_arg::{resolve, Size};
use anyhow::{bail, Context, Result};
use patio_core::trace::Op;
use patio_prefetch::replay::{self, Compute, ReplayConfig, Report, Request};
use patio_prefetch::{EngineConfig, PolicyKind, StoreConfig};
use serde::Serialize;
use std::path::PathBuf;

/// Slow-store and compute options of `replay` and `bench prefetch`.
#[derive(clap::Args, Clone, Debug)]
pub struct StoreArgs {
    /// Latency of every backend request, in milliseconds.
    #[arg(long, default_value_t = 2.0)]
    pub latency_ms: f64,
    /// Backend bandwidth in MB/s (10^6 bytes); 0 for unlimited.
    #[arg(long, default_value_t = 200.0)]
    pub bandwidth_mbps: f64,
    /// Backend requests served at the same time.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Compute between requests, as a multiple of the mean no-prefetch latency.
    #[arg(long, default_value_t = 1.0)]
    pub compute_ratio: f64,
    /// Whether compute sleeps or spins (spinning occupies a core).
    #[arg(long, value_enum, default_value_t = ComputeArg::Sleep)]
    pub compute: ComputeArg,
    /// Prefetch cache budget (a size: 64MiB, 1GiB) [default: 64MiB].
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<Size>,
    /// Deprecated spelling of --memory, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    pub budget_mib: Option<f64>,
    /// Prefetch worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeArg {
    Sleep,
    Spin,
}

/// The longest modelled latency of one request accepted on the command line: a
/// minute is already beyond any real store (and a larger one overflows the timers).
pub const MAX_LATENCY_MS: f64 = 60_000.0;

/// Checks a slow-store parameter given as `flag`: a finite number ≥ 0, and for
/// latencies at most [`MAX_LATENCY_MS`].
pub fn check_store_value(flag: &str, v: f64) -> Result<()> {
    if !(v >= 0.0 && v.is_finite()) {
        bail!("{flag} must be a finite number ≥ 0, not {v}");
    }
    if flag.starts_with("--latency") && v > MAX_LATENCY_MS {
        bail!("{flag} {v} is more than a minute per request (at most {MAX_LATENCY_MS})");
    }
    Ok(())
}

impl StoreArgs {
    pub fn config(&self, verify: bool) -> Result<ReplayConfig> {
        check_store_value("--latency-ms", self.latency_ms)?;
        check_store_value("--bandwidth-mbps", self.bandwidth_mbps)?;
        if !(self.compute_ratio >= 0.0 && self.compute_ratio.is_finite()) {
            bail!("--compute-ratio must be a finite number ≥ 0");
        }
        let budget = resolve(
            self.memory,
            "--memory",
            self.budget_mib,
            "--budget-mib",
            1 << 20,
            Size(64 << 20),
        )?;
        if self.concurrency == 0 || self.workers == 0 || budget == 0 {
            bail!("--concurrency, --workers and --memory must be at least 1");
        }
        Ok(ReplayConfig {
            store: StoreConfig {
                concurrency: self.concurrency,
                ..StoreConfig::with(self.latency_ms, self.bandwidth_mbps)
            },
            engine: EngineConfig {
                workers: self.workers,
                budget,
                ..EngineConfig::default()
            },
            compute_ratio: self.compute_ratio,
            compute: match self.compute {
                ComputeArg::Sleep => Compute::Sleep,
                ComputeArg::Spin => Compute::Spin,
            },
            verify,
            record_reads: false,
        })
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Trace to replay (.darshan, .csv, .ptrace); its read requests are replayed.
    trace: PathBuf,
    /// Data file the reads go to (at least as large as the trace's read extent).
    #[arg(long)]
    data: PathBuf,
    /// Prediction policy: none, readahead, stride, markov, pattern, oracle.
    #[arg(long)]
    policy: String,
    /// Replay only the N-th read stream (0-based, in the order `patio analyze` lists
    /// them); default: all read streams interleaved in time order.
    #[arg(long)]
    stream: Option<usize>,
    /// Start from a model saved by an earlier run (markov, pattern).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Save the learned model after the run (markov, pattern).
    #[arg(long)]
    save_model: Option<PathBuf>,
    /// Compare every read with the data file (outside the timed regions).
    #[arg(long)]
    verify: bool,
    /// Write one CSV line per read (stream, offset, length, hit/late/miss, µs spent),
    /// to compare which requests two policies serve differently.
    #[arg(long)]
    reads_csv: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// The report of one replay, as printed with `--json`.
#[derive(Serialize, Clone, Debug)]
pub struct ReportJson {
    pub policy: String,
    pub requests: u64,
    pub streams: usize,
    pub io_time_s: f64,
    pub total_time_s: f64,
    pub compute_time_s: f64,
    pub mean_latency_ms: f64,
    pub compute_gap_ms: f64,
    #[serde(flatten)]
    pub counters: CountersJson,
    pub model_bytes: u64,
    pub max_stream_model_bytes: u64,
    pub saved_model_bytes: u64,
    pub io_mode: String,
}

impl ReportJson {
    pub fn new(r: &Report) -> Self {
        let s = &r.stats;
        ReportJson {
            policy: r.policy.clone(),
            requests: r.requests,
            streams: r.streams,
            io_time_s: r.io_time.as_secs_f64(),
            total_time_s: r.total_time.as_secs_f64(),
            compute_time_s: r.compute_time.as_secs_f64(),
            mean_latency_ms: r.mean_latency.as_secs_f64() * 1e3,
            compute_gap_ms: r.compute_gap.as_secs_f64() * 1e3,
            counters: CountersJson::new(s),
            model_bytes: r.model_bytes,
            max_stream_model_bytes: r.max_stream_model_bytes,
            saved_model_bytes: r.saved_model_bytes(),
            io_mode: r.io_mode.clone(),
        }
    }
}

/// The read requests of a trace: one stream, or all read streams interleaved by
/// start time; returns them and the number of streams.
fn read_requests(args: &Args) -> Result<(Vec<Request>, usize)> {
    let trace = load_trace(&args.trace)?;
    let reads: Vec<_> = trace
        .streams
        .iter()
        .filter(|s| s.key.op == Op::Read && !s.is_empty())
        .collect();
    if reads.is_empty() {
        bail!("{}: the trace has no read requests", args.trace.display());
    }
    let chosen: Vec<_> = match args.stream {
        Some(i) if i >= reads.len() => bail!(
            "--stream {i}: the trace has {} read streams (0 to {})",
            reads.len(),
            reads.len() - 1
        ),
        Some(i) => vec![reads[i]],
        None => reads,
    };
    let mut timed: Vec<(f64, Request)> = Vec::new();
    for (s, stream) in chosen.iter().enumerate() {
        for i in 0..stream.len() {
            let request = Request {
                stream: s,
                offset: stream.offsets[i],
                len: stream.lengths[i],
            };
            timed.push((stream.starts[i], request));
        }
    }
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok((timed.into_iter().map(|t| t.1).collect(), chosen.len()))
}

pub fn run(args: Args) -> Result<()> {
    let kind: PolicyKind = args.policy.parse()?;
    let config = ReplayConfig {
        record_reads: args.reads_csv.is_some(),
        ..args.store.config(args.verify)?
    };
    let meta = std::fs::metadata(&args.data)
        .with_context(|| format!("cannot open data file {}", args.data.display()))?;
    if !meta.is_file() {
        anyhow::bail!(
            "--data {}: not a regular file (the data file the trace read is expected)",
            args.data.display()
        );
    }
    let size = meta.len();
    let (requests, streams) = read_requests(&args)?;
    replay::check(&requests, streams, &args.data, size)?;
    let models = match &args.model {
        Some(path) => {
            if !kind.has_model() {
                bail!("--model: the {kind} policy takes no model");
            }
            Some(patio_prefetch::model::read_models(path)?)
        }
        None => None,
    };
    if args.save_model.is_some() && !kind.has_model() {
        bail!("--save-model: the {kind} policy learns no model");
    }
    let policies = replay::policies(kind, &requests, streams, models.as_deref()).map_err(|e| {
        match &args.model {
            Some(path) => e.named(&path.display().to_string()),
            None => e,
        }
    })?;
    let report = replay::replay(&args.data, &requests, policies, &config)
        .with_context(|| format!("replay of {}", args.trace.display()))?;
    if let Some(path) = &args.save_model {
        patio_prefetch::model::write_models(path, &report.models)?;
    }
    if let Some(path) = &args.reads_csv {
        std::fs::write(path, reads_csv(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let json = ReportJson::new(&report);
    if args.json {
        let text = serde_json::to_string_pretty(&json)?;
        return crate::report::write_stdout(&format!("{text}\n"));
    }
    crate::report::write_stdout(&render(&json, &config))
}

/// The per-read records of a replay as CSV.
fn reads_csv(report: &Report) -> String {
    let mut out = String::from("index,stream,offset,len,outcome,io_us\n");
    for (i, r) in report.reads.iter().enumerate() {
        out.push_str(&format!(
            "{i},{},{},{},{},{:.1}\n",
            r.request.stream,
            r.request.offset,
            r.request.len,
            r.outcome.name(),
            r.io_time.as_secs_f64() * 1e6
        ));
    }
    out
}

fn render(j: &ReportJson, config: &ReplayConfig) -> String {
    use crate::report::{grouped, human_bytes, sig3};
    let mut lines = vec![
        ("policy", j.policy.clone()),
        (
            "requests",
            format!("{} in {} stream(s)", grouped(j.requests), j.streams),
        ),
        (
            "slow store",
            format!(
                "{} ms + {} MB/s, {} concurrent; data read with {}",
                config.store.latency.as_secs_f64() * 1e3,
                config.store.bandwidth / 1e6,
                config.store.concurrency,
                j.io_mode
            ),
        ),
        (
            "compute",
            format!(
                "{} × {} ms mean no-prefetch latency = {} ms per request ({})",
                config.compute_ratio,
                sig3(j.mean_latency_ms),
                sig3(j.compute_gap_ms),
                config.compute
            ),
        ),
        ("I/O time", format!("{:.3} s", j.io_time_s)),
        ("total time", format!("{:.3} s", j.total_time_s)),
    ];
    lines.extend(j.counters.lines());
    lines.push((
        "model",
        format!(
            "{} in memory (largest stream {}), {} saved",
            human_bytes(j.model_bytes),
            human_bytes(j.max_stream_model_bytes),
            human_bytes(j.saved_model_bytes)
        ),
    ));
    aligned(&lines, "")
}
