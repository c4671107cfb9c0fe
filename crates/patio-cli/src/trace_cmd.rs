//! `patio trace`: run a command under the LD_PRELOAD tracer (`capture/`), merge the
//! per-process raw captures it leaves into one trace, and convert traces.
//!
//! * `patio trace [-o DIR] [--only PREFIX] -- COMMAND [ARGS…]` — every process the
//!   command starts writes `DIR/<host>.<pid>.<n>.praw`; works under `mpirun` (each rank
//!   is one `patio trace`, all writing into DIR). Exits with the command's status.
//!   The MPI-IO layer (`libpatio_mpiio.so`), when built, is preloaded too: MPI programs
//!   then also leave MPIIO records (one per file extent of each MPI-IO call).
//! * `patio trace merge DIR -o TRACE` — one `.ptrace` or `.csv` from all captures.
//! * `patio trace convert TRACE --to csv|ptrace [-o OUT]`.
//! * `patio trace recover TRACE [--json]` — the trace a killed `patio mount trace -o TRACE`
//!   did not write, from the journal it appended to (`patio_fs::tracing::journal`).

use crate::load::{load_trace, write_trace, write_trace_as, OutputFormat, TraceWritten};
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use patio_core::capture::{self, Capture};
use patio_core::trace::Trace;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// File name of the tracer library.
const LIBRARY: &str = "libpatio_trace.so";

#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  patio trace -o run1 -- ./app input.h5             trace every process of ./app into run1/\n  mpirun -n 4 patio trace -o run1 -- python app.py     one capture per rank\n  patio trace merge run1 -o run1.ptrace               merge the per-process captures\n  patio analyze run1.ptrace                           report the patterns"
)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Directory for the per-process captures (created if missing; default
    /// patio-trace-<UTC time>, or patio-trace-job-<id> under an MPI/Slurm launcher).
    #[arg(short, long = "output", value_name = "DIR", alias = "out")]
    out: Option<PathBuf>,
    /// Trace only files at or below this path (e.g. the application's data directory).
    #[arg(long, value_name = "PREFIX")]
    only: Option<PathBuf>,
    /// The command to trace, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[derive(Subcommand)]
enum Action {
    /// Merge the raw captures (*.praw) of a directory into one trace (.ptrace or .csv).
    Merge(MergeArgs),
    /// Convert a trace (.darshan, .csv, .ptrace, .praw) to CSV or the native format.
    Convert(ConvertArgs),
    /// Write the trace of a killed `patio mount trace -o TRACE` from its journal
    /// (everything it recorded up to its last flush, at most a second before the kill).
    Recover(RecoverArgs),
}

#[derive(clap::Args)]
struct RecoverArgs {
    /// The trace the killed mount was to write (its --output); the journal beside it,
    /// `.<name>.journal`, is turned into it and removed.
    trace: PathBuf,
    /// Report what was recovered as JSON (journal, output, requests, streams, damage).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct MergeArgs {
    /// Directory written by `patio trace`.
    dir: PathBuf,
    /// Output trace; its extension (.ptrace or .csv) picks the format.
    #[arg(short, long)]
    output: PathBuf,
    /// Report what was written as JSON (inputs, output, format, requests, streams, bytes).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ConvertArgs {
    /// Input trace.
    input: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    to: OutputFormat,
    /// Output file (default: the input with the format's extension).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Report what was written as JSON (inputs, output, format, requests, streams, bytes).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.action {
        Some(Action::Merge(m)) => merge(&m.dir, &m.output, m.json),
        Some(Action::Recover(r)) => recover(&r.trace, r.json),
        Some(Action::Convert(c)) => {
            let output = c
                .output
                .unwrap_or_else(|| c.input.with_extension(c.to.extension()));
            if output == c.input {
                bail!("{}: output would overwrite the input", output.display());
            }
            let trace = load_trace(&c.input)?;
            let written = write_trace_as(&trace, &output, c.to)?;
            TraceWritten::new(&[&c.input], &trace, &output, written).report(c.json, "converted")
        }
        None => run_traced(args.run),
    }
}

// ---- running a command under the tracer -----------------------------------------

/// The tracer library: `$PATIO_PRELOAD`, else `PREFIX/lib/patio/` of the installation
/// the invoked `patio` belongs to (the venv's `.venv/lib/patio/` in a checkout, where
/// setup.sh installs it), else the `capture/` directory of the checkout it runs from.
fn tracer_library() -> Result<PathBuf> {
    crate::install::find_library(LIBRARY, "capture", "PATIO_PRELOAD")
}

fn absolute(p: &Path) -> Result<PathBuf> {
    p.canonicalize()
        .with_context(|| format!("cannot resolve {}", p.display()))
}

/// `patio-trace-job-<id>` when an MPI or Slurm launcher started us (so that every rank
/// picks the same directory), else `patio-trace-<UTC date-time>`.
fn default_dir() -> PathBuf {
    let job = ["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    if let Some(job) = job {
        let step = std::env::var("SLURM_STEP_ID")
            .map(|s| format!(".{s}"))
            .unwrap_or_default();
        let safe: String = format!("{job}{step}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        return PathBuf::from(format!("patio-trace-job-{safe}"));
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    PathBuf::from(format!(
        "patio-trace-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    ))
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn run_traced(args: RunArgs) -> Result<()> {
    crate::retired::warn_if_given("--out", "--output");
    let library = tracer_library()?;
    let dir = args.out.unwrap_or_else(default_dir);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create trace directory {}", dir.display()))?;
    let dir = absolute(&dir)?;
    // The MPI-IO layer too, when it is built: MPIIO records beside the POSIX ones.
    let layer = crate::run_cmd::mpiio_layer().ok();
    let mut preload = vec![library];
    preload.extend(layer.clone());
    let preload = crate::child::preload_with(&preload);
    let only = match &args.only {
        Some(prefix) => Some(
            prefix
                .canonicalize()
                .or_else(|_| std::path::absolute(prefix))
                .context("--only")?,
        ),
        None => None,
    };
    let mut env: Vec<(&str, Option<&OsStr>)> = vec![
        ("LD_PRELOAD", Some(&preload)),
        ("PATIO_TRACE_DIR", Some(dir.as_os_str())),
        ("PATIO_TRACE_ONLY", only.as_deref().map(Path::as_os_str)),
    ];
    let libraries = if layer.is_some() {
        crate::run_cmd::layer_library_env()
    } else {
        Vec::new()
    };
    for (var, path) in &libraries {
        env.push((var, Some(path.as_os_str())));
    }
    let code = crate::child::run(&args.command, &env)?;
    let files = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "praw"))
                .count()
        })
        .unwrap_or(0);
    eprintln!(
        "patio: traces in {} ({files} capture files); merge with: patio trace merge {} -o trace.ptrace",
        dir.display(),
        dir.display()
    );
    std::process::exit(code);
}

// ---- merging ---------------------------------------------------------------------

/// Reads raw captures and merges them into one trace; damaged files are reported as
/// warnings and their intact frames kept.
pub fn load_captures(files: &[PathBuf]) -> Result<Trace> {
    let mut captures = Vec::with_capacity(files.len());
    for file in files {
        match Capture::read(file) {
            Ok(c) => {
                if let Some(damage) = &c.damage {
                    eprintln!(
                        "patio: warning: {}: damaged capture, kept {} requests: {damage}",
                        file.display(),
                        c.records.len()
                    );
                }
                captures.push(c);
            }
            Err(e) if files.len() > 1 => {
                eprintln!("patio: warning: {}: skipped: {e}", file.display());
            }
            Err(e) => return Err(anyhow::Error::new(e).context(file.display().to_string())),
        }
    }
    Ok(capture::merge(&captures))
}

fn merge(dir: &Path, output: &Path, json: bool) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "praw") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        bail!(
            "{}: no raw captures (*.praw): did the traced command read or write any file?",
            dir.display()
        );
    }
    let trace = load_captures(&files)?;
    let written = write_trace(&trace, output)?;
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    TraceWritten::new(&inputs, &trace, output, written).report(json, "merged")
}

/// What `patio trace recover --json` prints.
#[derive(serde::Serialize)]
struct Recovered {
    journal: String,
    output: String,
    requests: usize,
    streams: usize,
    /// What was dropped (a torn or damaged last frame), or null.
    damage: Option<String>,
}

fn recover(trace: &Path, json: bool) -> Result<()> {
    let r = patio_fs::tracing::journal::recover(trace)?;
    if let Some(damage) = &r.damage {
        eprintln!("patio: {}: {damage}", r.journal.display());
    }
    if json {
        let report = Recovered {
            journal: r.journal.display().to_string(),
            output: trace.display().to_string(),
            requests: r.requests,
            streams: r.streams,
            damage: r.damage,
        };
        let text = serde_json::to_string_pretty(&report)?;
        return crate::report::write_stdout(&format!("{text}\n"));
    }
    crate::report::write_stdout(&format!(
        "recovered {} requests in {} streams from {} -> {}\n",
        r.requests,
        r.streams,
        r.journal.display(),
        trace.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
    }
}
