//! `patio run --mpiio -- CMD…`: runs an unmodified program with patio's MPI-IO layer
//! (`libpatio_mpiio.so`, built from `mpiio/`) preloaded into every process it starts —
//! under `mpirun` on one node every rank inherits it, as `mpirun -x LD_PRELOAD=…` would
//! pass it to ranks on other nodes. The layer records MPI-IO calls when `patio trace`
//! runs around it, serves the reads of files that have a registered reorganized
//! container (`patio reorg apply`, `patio reorg status FILE`) from that container, and
//! with `--prefetch POLICY` prefetches each rank's independent reads by their pattern.

use anyhow::{bail, Result};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// File name of the MPI-IO layer.
pub const MPIIO_LIBRARY: &str = "libpatio_mpiio.so";
/// File name of the C library of reorganized files the layer loads.
pub const REORG_LIBRARY: &str = "libpatio_reorg.so";

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  patio run --mpiio -- mpirun -n 64 ./tile_reader data.bin\n      reads of data.bin served from its registered reorganized container\n  patio run --mpiio --stats run-stats -- mpirun -n 4 ./app\n      each rank writes what it served to run-stats/\n  mpirun -n 64 -x LD_PRELOAD=$(patio run --print-library) ./tile_reader data.bin\n      the same, passing the layer to ranks on other nodes\n\nA file is served only when `patio reorg status FILE` says its container matches; any\nother file, and every write, goes to the original untouched."
)]
pub struct Args {
    /// Preload the MPI-IO layer (libpatio_mpiio.so) into the command's processes.
    #[arg(long, required_unless_present = "print_library")]
    mpiio: bool,
    /// Prefetch each rank's independent reads with this policy (none, readahead, stride,
    /// markov, pattern): through the prefetch engine for files not served, as read-ahead
    /// from the container for served ones.
    #[arg(long, value_name = "POLICY")]
    prefetch: Option<String>,
    /// Each rank writes a JSON summary of what it served (file, rank, served_calls,
    /// served_bytes, physical_reads, passed_calls) into this directory at close.
    #[arg(long, value_name = "DIR")]
    stats: Option<PathBuf>,
    /// Print the path of the MPI-IO layer (for `mpirun -x LD_PRELOAD=…`) and exit.
    #[arg(long)]
    print_library: bool,
    /// The command to run, after `--`.
    #[arg(
        last = true,
        required_unless_present = "print_library",
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// File name of the prefetch engine's C library the layer loads.
pub const PREFETCH_LIBRARY: &str = "libpatio_prefetch.so";

/// The MPI-IO layer (`$PATIO_MPIIO_LIB` overrides).
pub fn mpiio_layer() -> Result<PathBuf> {
    crate::install::find_library(MPIIO_LIBRARY, "mpiio", "PATIO_MPIIO_LIB")
}

/// The environment naming the libraries the layer loads (`PATIO_REORG_LIB`,
/// `PATIO_PREFETCH_LIB`): those found, unless the user set the variable. (The layer also
/// looks beside itself; a checkout builds them elsewhere.)
pub fn layer_library_env() -> Vec<(&'static str, PathBuf)> {
    [
        (REORG_LIBRARY, "PATIO_REORG_LIB"),
        (PREFETCH_LIBRARY, "PATIO_PREFETCH_LIB"),
    ]
    .into_iter()
    .filter(|(_, var)| std::env::var_os(var).is_none())
    .filter_map(|(name, var)| {
        crate::install::find_library(name, "target/release", var)
            .ok()
            .map(|p| (var, p))
    })
    .collect()
}

pub fn run(args: Args) -> Result<u8> {
    let layer = mpiio_layer()?;
    if args.print_library {
        println!("{}", layer.display());
        return Ok(0);
    }
    if !args.mpiio {
        bail!("nothing to run under: give --mpiio");
    }
    let mut env: Vec<(&str, Option<&OsStr>)> = Vec::new();
    let preload = crate::child::preload_with(&[layer]);
    env.push(("LD_PRELOAD", Some(&preload)));
    let libraries = layer_library_env();
    for (var, path) in &libraries {
        env.push((var, Some(path.as_os_str())));
    }
    if let Some(policy) = &args.prefetch {
        policy
            .parse::<patio_prefetch::PolicyKind>()
            .map_err(|e| anyhow::anyhow!("--prefetch: {e}"))?;
        env.push(("PATIO_MPIIO_PREFETCH", Some(OsStr::new(policy))));
    }
    let stats;
    if let Some(dir) = &args.stats {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        stats = std::path::absolute(dir)?;
        env.push(("PATIO_MPIIO_STATS", Some(stats.as_os_str())));
    }
    let code = crate::child::run(&args.command, &env)?;
    Ok(code.clamp(0, 255) as u8)
}
