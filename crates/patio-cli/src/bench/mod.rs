//! `patio bench …`: benchmarks that print a table (or `--json`) comparing patio's
//! pattern engine with its strongest honest baseline, side by side in one run.
//!
//! This file holds the subcommand enum, the dispatch, and the timing helpers the
//! benchmarks share (alternating repetitions, median); tables, progress bars and number
//! formats are every command's, in [`crate::report`].
//! The inputs are in [`workloads`]; each benchmark is in its own module.

use anyhow::Result;
use std::time::{Duration, Instant};

pub use crate::report::{grouped, human_bytes, print_json, progress, sig3, write_stdout, Table};

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

/// A time in milliseconds with a sensible number of decimals.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let d = |n| Duration::from_millis(n);
        assert_eq!(median(&[d(5), d(1), d(3)]), d(3));
        assert_eq!(
            median(&[d(4), d(1), d(3), d(2)]),
            Duration::from_micros(2500)
        );
    }
}
