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

/// The layer and the libraries it loads (`$PATIO_MPIIO_LIB`, `$PATIO_REORG_LIB`,
/// `$PATIO_PREFETCH_LIB` override).
pub fn mpiio_libraries() -> Result<[PathBuf; 3]> {
    let find = crate::install::find_library;
    Ok([
        find(MPIIO_LIBRARY, "mpiio", "PATIO_MPIIO_LIB")?,
        find(REORG_LIBRARY, "target/release", "PATIO_REORG_LIB")?,
        find(PREFETCH_LIBRARY, "target/release", "PATIO_PREFETCH_LIB")?,
    ])
}

pub fn run(args: Args) -> Result<u8> {
    let [layer, reorg, prefetch] = mpiio_libraries()?;
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
    env.push(("PATIO_REORG_LIB", Some(reorg.as_os_str())));
    env.push(("PATIO_PREFETCH_LIB", Some(prefetch.as_os_str())));
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
