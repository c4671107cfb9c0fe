//! `patio bench prefetch`: every prefetch policy replayed on the same synthetic read
//! workload, side by side in one run, over the slow-store model (patio-prefetch's
//! `workloads`, `replay`). The I/O-time reduction of each policy is relative to
//! `none` in the same run. The Markov model is trained on a first run with another
//! seed (another process reading the same file, other random choices), as the
//! papers train it on an initial execution; `--training same` trains it on the very
//! requests it then predicts (a repeated run). The row `pattern+model` is the pattern
//! policy started from the model it saved after that same training run.

use super::{human_bytes, median, progress, sig3, write_stdout, Table, SEED};
use crate::counters::share;
use crate::replay::{ReportJson, StoreArgs};
use anyhow::{bail, Context, Result};
use patio_prefetch::markov::{Markov, DEFAULT_BLOCK};
use patio_prefetch::policy::Pattern;
use patio_prefetch::replay::{self, Report, Request};
use patio_prefetch::workloads::{self, Workload};
use patio_prefetch::{Policy, PolicyKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Requests per workload by default: all workloads (30) stay within a few minutes at
/// 2 ms; a single one gets more.
const DEFAULT_REQUESTS_ALL: usize = 300;
const DEFAULT_REQUESTS_ONE: usize = 1000;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Training {
    /// A first run with another seed (default).
    Other,
    /// The same requests that are then replayed.
    Same,
}

#[derive(clap::Args)]
pub struct Args {
    /// One workload (default: all). Names: contiguous, strided, strided-2d,
    /// strided-3d, deltas, climate-row, climate-col, pagoda, correlation, random,
    /// each also with -noisy or -change.
    #[arg(long)]
    workload: Vec<String>,
    /// Requests per workload (default 1000 for chosen workloads, 300 for all).
    #[arg(long)]
    requests: Option<usize>,
    /// Repetitions of each policy (alternating); the run with the median I/O time is
    /// reported.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// What the learned models (markov, pattern+model) are trained on.
    #[arg(long, alias = "markov-training", value_enum, default_value_t = Training::Other)]
    training: Training,
    /// Directory for the data files (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON: one workload as {"workload", "latency_ms", "compute_ratio",
    /// "policies": {...}}, several as {"workloads": [...]}.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct PolicyJson {
    #[serde(flatten)]
    report: ReportJson,
    io_time_reduction: f64,
    total_time_reduction: f64,
}

#[derive(Serialize)]
struct WorkloadJson {
    workload: String,
    requests: usize,
    data_bytes: u64,
    latency_ms: f64,
    bandwidth_mbps: f64,
    compute_ratio: f64,
    compute: String,
    training: String,
    policies: BTreeMap<String, PolicyJson>,
}

pub fn run(args: Args) -> Result<()> {
    let config = args.store.config(false)?;
    let names = if args.workload.is_empty() {
        workloads::names()
    } else {
        args.workload.clone()
    };
    let n = args.requests.unwrap_or(if args.workload.is_empty() {
        DEFAULT_REQUESTS_ALL
    } else {
        DEFAULT_REQUESTS_ONE
    });
    if n < 2 {
        bail!("--requests must be at least 2");
    }
    // Refuse unknown names before any work.
    let mut loads = Vec::new();
    for name in &names {
        let w = workloads::generate(name, n, SEED)?;
        let train_seed = match args.training {
            Training::Other => SEED + 1,
            Training::Same => SEED,
        };
        let train = workloads::generate(name, n, train_seed)?;
        loads.push((w, train));
    }
    let dir = match &args.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .context("cannot create a directory for the data files")?;
    let reps = args.reps.max(1);
    let bar = progress((loads.len() * reps * ROWS.len()) as u64, args.json);
    let mut out = Vec::new();
    for (w, train) in &loads {
        bar.set_message(w.name.clone());
        let result = run_workload(w, train, &config, reps, &dir, &bar)?;
        if !args.json {
            bar.suspend(|| print_table(w, &result, &config, &args))?;
        }
        out.push(to_json(w, &result, &args));
    }
    bar.finish_and_clear();
    if args.json {
        let text = if out.len() == 1 {
            serde_json::to_string_pretty(&out[0])?
        } else {
            serde_json::to_string_pretty(&serde_json::json!({ "workloads": out }))?
        };
        write_stdout(&format!("{text}\n"))?;
    }
    Ok(())
}

/// The rows of the table, every policy and pattern started from a saved model:
/// `(name, policy, whether it starts from the training run)`.
const ROWS: [(&str, PolicyKind, bool); 7] = [
    ("none", PolicyKind::None, false),
    ("readahead", PolicyKind::Readahead, false),
    ("stride", PolicyKind::Stride, false),
    ("markov", PolicyKind::Markov, true),
    ("pattern", PolicyKind::Pattern, false),
    ("pattern+model", PolicyKind::Pattern, true),
    ("oracle", PolicyKind::Oracle, false),
];

/// The policy `kind` after a first run over `train`'s requests: Markov trained on
/// them, pattern started from the model it saved after them.
fn trained(kind: PolicyKind, train: &Workload) -> Result<Box<dyn Policy>> {
    Ok(match kind {
        PolicyKind::Markov => {
            let mut markov = Markov::new(DEFAULT_BLOCK);
            markov.train(&train.requests);
            Box::new(markov)
        }
        PolicyKind::Pattern => {
            let mut first = Pattern::new();
            for &(offset, len) in &train.requests {
                first.observe(offset, len, 1);
            }
            Box::new(Pattern::load(&first.predictor().save())?)
        }
        other => bail!("the {other} policy learns no model"),
    })
}

/// Every row on `w`, `reps` times alternating; per row the median run.
fn run_workload(
    w: &Workload,
    train: &Workload,
    config: &replay::ReplayConfig,
    reps: usize,
    dir: &tempfile::TempDir,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<(&'static str, Report)>> {
    let path = dir.path().join(format!("{}.data", w.name));
    w.write_data(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let requests: Vec<Request> = w
        .requests
        .iter()
        .map(|&(offset, len)| Request {
            stream: 0,
            offset,
            len,
        })
        .collect();
    let mut runs: Vec<Vec<Report>> = vec![Vec::new(); ROWS.len()];
    for _ in 0..reps {
        for (i, &(row, kind, from_training)) in ROWS.iter().enumerate() {
            let policies = if from_training {
                vec![trained(kind, train)?]
            } else {
                replay::policies(kind, &requests, 1, None)?
            };
            let report = replay::replay(&path, &requests, policies, config)
                .with_context(|| format!("{} with {row}", w.name))?;
            runs[i].push(report);
            bar.inc(1);
        }
    }
    std::fs::remove_file(&path).ok();
    Ok(ROWS
        .iter()
        .zip(runs)
        .map(|(&(row, _, _), reports)| (row, median_run(reports)))
        .collect())
}

/// The run whose I/O time is the median (the lower middle one for even counts).
fn median_run(mut reports: Vec<Report>) -> Report {
    let times: Vec<_> = reports.iter().map(|r| r.io_time).collect();
    let m = median(&times);
    reports.sort_by_key(|r| r.io_time);
    let i = reports.iter().rposition(|r| r.io_time <= m).unwrap_or(0);
    reports.swap_remove(i)
}

fn reduction(x: f64, base: f64) -> f64 {
    if base > 0.0 {
        1.0 - x / base
    } else {
        0.0
    }
}

fn to_json(w: &Workload, result: &[(&str, Report)], args: &Args) -> WorkloadJson {
    let none = &result[0].1;
    let policies = result
        .iter()
        .map(|(row, r)| {
            (
                row.to_string(),
                PolicyJson {
                    report: ReportJson::new(r),
                    io_time_reduction: reduction(
                        r.io_time.as_secs_f64(),
                        none.io_time.as_secs_f64(),
                    ),
                    total_time_reduction: reduction(
                        r.total_time.as_secs_f64(),
                        none.total_time.as_secs_f64(),
                    ),
                },
            )
        })
        .collect();
    WorkloadJson {
        workload: w.name.clone(),
        requests: w.requests.len(),
        data_bytes: w.file_size,
        latency_ms: args.store.latency_ms,
        bandwidth_mbps: args.store.bandwidth_mbps,
        compute_ratio: args.store.compute_ratio,
        compute: format!("{:?}", args.store.compute).to_lowercase(),
        training: format!("{:?}", args.training).to_lowercase(),
        policies,
    }
}

fn print_table(
    w: &Workload,
    result: &[(&str, Report)],
    config: &replay::ReplayConfig,
    args: &Args,
) -> Result<()> {
    let none = &result[0].1;
    let title = format!(
        "{}: {} requests, {} read; slow store {} ms + {} MB/s ×{}; compute {} × {} ms ({}); {}",
        w.name,
        w.requests.len(),
        human_bytes(w.read_bytes()),
        args.store.latency_ms,
        args.store.bandwidth_mbps,
        config.store.concurrency,
        config.compute_ratio,
        sig3(none.mean_latency.as_secs_f64() * 1e3),
        config.compute,
        none.io_mode
    );
    let mut t = Table::new(
        title,
        &[
            "policy", "I/O s", "total s", "I/O cut", "hits", "late", "misses", "accuracy",
            "coverage", "wasted", "backend", "ns/req", "model",
        ],
    );
    let pct = |x: f64| share(Some(x));
    for (row, r) in result {
        let s = &r.stats;
        t.row(vec![
            row.to_string(),
            format!("{:.3}", r.io_time.as_secs_f64()),
            format!("{:.3}", r.total_time.as_secs_f64()),
            pct(reduction(
                r.io_time.as_secs_f64(),
                none.io_time.as_secs_f64(),
            )),
            s.hits.to_string(),
            s.late_hits.to_string(),
            s.misses.to_string(),
            share(s.accuracy()),
            pct(s.coverage()),
            human_bytes(s.wasted_bytes),
            s.backend_requests.to_string(),
            sig3(s.analyzer_ns_per_request()),
            human_bytes(r.model_bytes),
        ]);
    }
    t.note(format!(
        "markov ({} KiB blocks) and pattern+model trained on {}; model = policy state in \
         memory at the end",
        DEFAULT_BLOCK >> 10,
        match args.training {
            Training::Other => "a run with another seed",
            Training::Same => "the same requests (a repeated run)",
        }
    ));
    t.print()?;
    write_stdout("\n")
}
