//! `patio bench …`: benchmarks that print a table (or `--json`) comparing patio's
//! pattern engine with its strongest honest baseline, side by side in one run
//! (docs: /work/shared/design/BENCHMARKING.md).
//!
//! This file holds the subcommand enum, the dispatch, and the helpers the benchmarks
//! share: timing (alternating repetitions, median), progress bars and table printing.
//! The inputs are in [`workloads`]; each benchmark is in its own module.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::time::{Duration, Instant};

mod cache;
mod compress;
mod container;
mod detect;
mod lookup;
mod prefetch;
mod stress;
mod traces;
pub mod workloads;

/// Seed of every random generator in the benchmarks, so runs are reproducible.
pub const SEED: u64 = 0x7061_7469_6f5f_6265; // "patio_be"

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Pattern map vs sorted 1-to-1 extent table: bytes, build time, ns per lookup
    /// (the remap-table comparison of the file-reorganization slides).
    Lookup {
        /// Extents per input.
        #[arg(long, default_value_t = 1_000_000)]
        entries: u64,
        /// Timed repetitions of each side (alternating); the median is reported.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Print {"cases": [...]} as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Detector + pattern tree throughput vs zstd-3 and xz-6 on the same offsets.
    Detect {
        /// Offsets per input.
        #[arg(long, default_value_t = 1_000_000)]
        entries: u64,
        /// Detector search window.
        #[arg(long, default_value_t = patio_core::detect::DEFAULT_WINDOW)]
        window: usize,
        /// Timed repetitions of each side (alternating); the median is reported.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Print {"cases": [...]} as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Index compression of synthetic HPC write patterns (local and global pattern
    /// maps vs zlib-9 and xz-9 of the raw 32-byte index entries).
    Compress {
        /// Print {"cases": [...]} as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Prefetch policies side by side on synthetic read workloads over a slow store
    /// (I/O time, hits, accuracy, coverage, waste, model size).
    /// The stream-set encoding on real traces: size vs every generic coder, speed vs xz, query time, ablation.
    Traces(traces::Args),
    Prefetch(prefetch::Args),
    /// Container index at scale: W writers × N strided 4 KiB writes, pattern vs raw
    /// index (bytes on disk, map bytes in memory, read-open time).
    Container(container::Args),
    /// HDF5 layout replicas vs the original read the best way h5py allows, under the
    /// striped storage model (see `patio bench layout --help`).
    Layout(crate::python::Passthrough),
    /// AMR box layouts (original, Morton, Hilbert, cluster) on synthetic BISICLES,
    /// Chombo-benchmark and cylinder hierarchies under the striped storage model
    /// (see `patio bench amr --help`).
    Amr(crate::python::Passthrough),
    /// Segment-grouping cache: none vs lru vs group through real `patio mount cache`
    /// mounts over the HDD-like storage model (zooming, tiled and IOR-like reads;
    /// group hit rate, bandwidth, grouping I/O, segment-size sweep).
    Cache(cache::Args),
    /// Pattern-aware reorganization with real MPI ranks over the striped storage model:
    /// original (independent and collective MPI-IO) vs the reorganized container (see
    /// `patio bench reorg --help`).
    Reorg(crate::python::Passthrough),
    /// A model-checked exerciser of a directory (a mount): processes and threads run
    /// random writes, reads, truncations, copies, fallocate, reopens on a few files and
    /// check every read against a byte model of each file (not a benchmark: a stress
    /// test; see `patio bench stress --help`).
    Stress(stress::Args),
}

/// A benchmark implemented in Python: exits as it exits.
fn python_bench(name: &str, args: &crate::python::Passthrough) -> Result<()> {
    match crate::python::exec_helper(name, args)? {
        0 => Ok(()),
        code => std::process::exit(code.into()),
    }
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Lookup {
            entries,
            reps,
            json,
        } => lookup::run(entries, reps, json),
        BenchCommand::Detect {
            entries,
            window,
            reps,
            json,
        } => detect::run(entries, window, reps, json),
        BenchCommand::Compress { json } => compress::run(json),
        BenchCommand::Traces(args) => traces::run(args),
        BenchCommand::Prefetch(args) => prefetch::run(args),
        BenchCommand::Container(args) => container::run(args),
        BenchCommand::Cache(args) => cache::run(args),
        BenchCommand::Layout(args) => python_bench("bench-layout", &args),
        BenchCommand::Amr(args) => python_bench("bench-amr", &args),
        BenchCommand::Reorg(args) => python_bench("bench-reorg", &args),
        BenchCommand::Stress(args) => stress::run(args),
    }
}

/// Wall time of one call of `f`, and its result.
pub fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

/// CPU time of the calling thread (user and system), for timings that other
/// processes sharing the cores must not inflate.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID is available on Linux");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time per call of `f` (thread CPU time, [`thread_cpu_time`]), calling it
/// repeatedly until `at_least` has passed (at least once), and its last result: an
/// operation of microseconds is timed over many calls, not one.
pub fn cpu_time_per_call<T>(at_least: Duration, mut f: impl FnMut() -> T) -> (Duration, T) {
    let start = thread_cpu_time();
    let mut calls = 1u32;
    let mut out = f();
    while thread_cpu_time() - start < at_least {
        out = f();
        calls += 1;
    }
    ((thread_cpu_time() - start) / calls, out)
}

/// Median of a non-empty list of durations (mean of the two middle ones when even).
pub fn median(samples: &[Duration]) -> Duration {
    assert!(!samples.is_empty(), "median of no samples");
    let mut s = samples.to_vec();
    s.sort();
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2
    }
}

/// Runs sides `0..sides` `reps` times each, alternating (0 1 2 0 1 2 …) so that
/// drift in machine load hits every side alike, and returns each side's median.
/// `run(i)` runs side `i` once and returns the time it measured (so it can keep its
/// result, and drop the previous one, outside the timed region).
pub fn alternate(
    sides: usize,
    reps: usize,
    mut run: impl FnMut(usize) -> Result<Duration>,
) -> Result<Vec<Duration>> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(reps); sides];
    for _ in 0..reps.max(1) {
        for (side, out) in samples.iter_mut().enumerate() {
            out.push(run(side)?);
        }
    }
    Ok(samples.iter().map(|s| median(s)).collect())
}

/// A progress bar on stderr, hidden when the output is JSON.
pub fn progress(len: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Prints `{"cases": rows}` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(cases: &[T]) -> Result<()> {
    #[derive(Serialize)]
    struct Out<'a, T> {
        cases: &'a [T],
    }
    let text = serde_json::to_string_pretty(&Out { cases })?;
    write_stdout(&format!("{text}\n"))
}

/// Writes `text` to stdout in one go.
/// Standard output that remembers a reader that went away (`patio … | head`): the
/// command then ends quietly instead of reporting the failed write as an error.
pub struct PipeOut {
    inner: std::io::StdoutLock<'static>,
    pub closed: bool,
}

impl PipeOut {
    pub fn new() -> Self {
        PipeOut {
            inner: std::io::stdout().lock(),
            closed: false,
        }
    }

    /// `result` of writing through this output, with a closed pipe counted as success.
    pub fn finish<T, E>(&self, result: std::result::Result<T, E>) -> std::result::Result<(), E> {
        match result {
            Err(_) if self.closed => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl std::io::Write for PipeOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.closed |= matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
        r
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.closed |= matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
        r
    }
}

pub fn write_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// A plain text table: a title, headers, rows; columns are right-aligned except the
/// first and any column listed in `left`.
pub struct Table {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
    notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            left: vec![0],
            notes: Vec::new(),
        }
    }

    /// Left-aligns column `col` (text columns).
    pub fn left_align(mut self, col: usize) -> Self {
        self.left.push(col);
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// A line printed under the table.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (w, cell) in width.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = width[i] - c.chars().count();
                    if self.left.contains(&i) {
                        format!("{c}{}", " ".repeat(pad))
                    } else {
                        format!("{}{c}", " ".repeat(pad))
                    }
                })
                .collect();
            parts.join("  ").trim_end().to_string()
        };
        let total = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        let mut out = String::new();
        out.push_str(&self.title);
        out.push('\n');
        out.push_str(&line(&self.headers));
        out.push('\n');
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    pub fn print(&self) -> Result<()> {
        write_stdout(&self.render())
    }
}

/// Bytes in a short human form: `812 B`, `28.4 KiB`, `61.0 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A ratio or rate with about three significant digits: `37.0`, `1.52`, `12345`.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A count with thousands separators: `1_000_000` → `1,000,000`.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A time in milliseconds with a sensible number of decimals.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(grouped(12), "12");
        assert_eq!(human_bytes(28), "28 B");
        assert_eq!(human_bytes(64_000_000), "61.0 MiB");
        let d = |n| Duration::from_millis(n);
        assert_eq!(median(&[d(5), d(1), d(3)]), d(3));
        assert_eq!(
            median(&[d(4), d(1), d(3), d(2)]),
            Duration::from_micros(2500)
        );
    }
}
