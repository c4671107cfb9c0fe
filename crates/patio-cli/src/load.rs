//! Loading traces in any supported format (chosen by content, then by extension),
//! writing them (format by extension), and `patio convert`.

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use patio_core::trace::{Trace, NATIVE_MAGIC};
use patio_core::Detector;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A native patio trace is recognised by its magic whatever its name; Darshan logs and
/// CSV traces are recognised by their extension.
fn looks_native(head: &[u8]) -> bool {
    head.starts_with(NATIVE_MAGIC)
}

/// Reads a trace; damage in a native trace is reported on stderr and the intact part
/// returned.
pub fn load_trace(path: &Path) -> Result<Trace> {
    load_trace_with(path, &ProgressBar::hidden())
}

/// [`load_trace`] reporting on `bar`: the bytes parsed of a CSV trace (and of the CSV a
/// Darshan log is turned into).
fn load_trace_with(path: &Path, bar: &ProgressBar) -> Result<Trace> {
    let mut head = [0u8; 4];
    {
        use std::io::Read;
        let mut f =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let n = f
            .read(&mut head)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            // An empty file is an empty trace whatever its extension.
            return Ok(Trace::default());
        }
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if head.starts_with(patio_core::capture::MAGIC) || ext == "praw" {
        return crate::trace_cmd::load_captures(&[path.to_path_buf()]);
    }
    if looks_native(&head) || ext == "ptrace" {
        let recovered = Trace::read_native(path).with_context(|| path.display().to_string())?;
        if let Some(damage) = recovered.damage {
            eprintln!(
                "patio: warning: {}: damaged trace, kept {} streams / {} requests: {damage}",
                path.display(),
                recovered.trace.streams.len(),
                recovered.trace.requests()
            );
        }
        return Ok(recovered.trace);
    }
    match ext.as_str() {
        "darshan" => load_darshan(path, bar),
        "csv" => read_csv_counted(path, &path.display().to_string(), bar),
        _ => bail!(
            "{}: unknown trace format (expected a .darshan log, a .csv trace or a native .ptrace trace)",
            path.display()
        ),
    }
}

/// Darshan logs are read by PyDarshan through `python -m patio.dxt`, which writes the
/// documented CSV.
fn load_darshan(path: &Path, bar: &ProgressBar) -> Result<Trace> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let csv = dir.path().join("trace.csv");
    crate::python::run_helper("dxt", &[path.as_os_str(), "-o".as_ref(), csv.as_os_str()])
        .with_context(|| format!("cannot read Darshan log {}", path.display()))?;
    read_csv_counted(&csv, &csv.display().to_string(), bar)
}

/// Parses the CSV trace at `path` (`name` in its errors), counting its bytes on `bar`.
fn read_csv_counted(path: &Path, name: &str, bar: &ProgressBar) -> Result<Trace> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    crate::report::count_bytes(bar, len);
    Ok(Trace::parse_csv(
        std::io::BufReader::new(bar.wrap_read(file)),
        name,
    )?)
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Input trace (.darshan, .csv or .ptrace).
    input: PathBuf,
    /// Output file; its extension (.csv or .ptrace) picks the format.
    #[arg(short, long)]
    output: PathBuf,
    /// Report what was written as JSON (inputs, output, format, requests, streams, bytes).
    #[arg(long)]
    json: bool,
}

/// [`load_trace`] behind a spinner naming the file (hidden with `hidden`, and when
/// stderr is not a terminal): reading a large trace takes a while.
pub fn load_trace_shown(path: &Path, hidden: bool) -> Result<Trace> {
    let bar = crate::report::spinner(hidden);
    bar.set_message(format!("reading {}", path.display()));
    let trace = load_trace_with(path, &bar);
    bar.finish_and_clear();
    trace
}

pub fn convert(args: ConvertArgs) -> Result<()> {
    let trace = load_trace_shown(&args.input, args.json)?;
    let bar = crate::report::progress(trace.requests() as u64, args.json);
    bar.set_message(format!("requests, writing {}", args.output.display()));
    let written = write_trace_shown(&trace, &args.output, &bar);
    bar.finish_and_clear();
    let written = written?;
    TraceWritten::new(&[&args.input], &trace, &args.output, written).report(args.json, "converted")
}

/// What a command that writes a trace (`convert`, `trace merge|convert|recover`)
/// reports: one line of text, or with `--json` this object.
#[derive(Serialize)]
pub struct TraceWritten {
    pub inputs: Vec<String>,
    pub output: String,
    /// `csv` or `ptrace`.
    pub format: &'static str,
    pub requests: u64,
    pub streams: u64,
    /// Size of the written file.
    pub bytes: u64,
}

impl TraceWritten {
    pub fn new(inputs: &[&Path], trace: &Trace, output: &Path, written: Written) -> Self {
        TraceWritten {
            inputs: inputs.iter().map(|p| p.display().to_string()).collect(),
            output: output.display().to_string(),
            format: written.format.extension(),
            requests: trace.requests() as u64,
            streams: trace.streams.len() as u64,
            bytes: written.bytes,
        }
    }

    /// Prints the report on stdout: JSON, or `VERB N requests in M streams -> OUTPUT`.
    pub fn report(&self, json: bool, verb: &str) -> Result<()> {
        if json {
            let text = serde_json::to_string_pretty(self)?;
            return crate::report::write_stdout(&format!("{text}\n"));
        }
        let from = match self.inputs.as_slice() {
            [one] => one.clone(),
            many => format!("{} inputs", many.len()),
        };
        crate::report::write_stdout(&format!(
            "{verb} {from}: {} requests in {} streams -> {} ({})\n",
            self.requests,
            self.streams,
            self.output,
            crate::report::human_bytes(self.bytes)
        ))
    }
}

/// The format a trace was written in and the size of the file.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub format: OutputFormat,
    pub bytes: u64,
}

/// Formats a trace can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Csv,
    Ptrace,
}

impl OutputFormat {
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Csv => "csv",
            OutputFormat::Ptrace => "ptrace",
        }
    }
}

/// Writes a trace in the format its extension names (.csv or .ptrace): through a
/// temporary file beside it, fsynced and renamed into place.
pub fn write_trace(trace: &Trace, output: &Path) -> Result<Written> {
    write_trace_shown(trace, output, &ProgressBar::hidden())
}

/// [`write_trace`] counting on `bar` the requests coded (a `.ptrace`, which may code
/// fewer than all: repeated streams are stored once) or written (a `.csv`).
fn write_trace_shown(trace: &Trace, output: &Path, bar: &ProgressBar) -> Result<Written> {
    let format = match output.extension().and_then(|e| e.to_str()) {
        Some("csv") => OutputFormat::Csv,
        Some("ptrace") => OutputFormat::Ptrace,
        _ => bail!("{}: output must end in .csv or .ptrace", output.display()),
    };
    write_trace_counted(trace, output, format, bar)
}

pub fn write_trace_as(trace: &Trace, output: &Path, format: OutputFormat) -> Result<Written> {
    write_trace_counted(trace, output, format, &ProgressBar::hidden())
}

fn write_trace_counted(
    trace: &Trace,
    output: &Path,
    format: OutputFormat,
    bar: &ProgressBar,
) -> Result<Written> {
    let bytes = match format {
        OutputFormat::Csv => {
            let mut buf = Vec::new();
            trace.write_csv_observed(&mut buf, &mut |rows| bar.set_position(rows))?;
            buf
        }
        OutputFormat::Ptrace => {
            let mut coded = |done: u64, total: u64| {
                bar.set_length(total);
                bar.set_position(done);
            };
            patio_core::ptrace::encode_observed(trace, &Detector::default(), &mut coded)?
        }
    };
    // Crash-safe: a reader (or a kill) sees the old file or the whole new one.
    patio_core::persist::write_file(output, &bytes)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(Written {
        format,
        bytes: bytes.len() as u64,
    })
}
