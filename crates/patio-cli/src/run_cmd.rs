//! `patio run --mpiio -- CMD…`: runs an unmodified program with patio's MPI-IO layer
//! (`libpatio_mpiio.so`, built from `mpiio/`) preloaded into every process it starts —
//! under `mpirun` on one node every rank inherits it, as `mpirun -x LD_PRELOAD=…` would
//! pass it to ranks on other nodes. The layer records MPI-IO calls when `patio trace`
//! runs around it, serves the reads of files that have a registered reorganized
//! container (`patio reorg apply`, `patio reorg status FILE`) from that container, and
//! with `--prefetch POLICY` prefetches each rank's independent reads by their pattern.
//!
//! `patio run --hdf5 -- CMD…` loads patio's HDF5 VOL connector (`libpatio_vol.so`,
//! built from `vol/`) into an unmodified HDF5 program, as `patio layout vol-env` says:
//! its reads of files with a layout knowledge base are recorded there.

use anyhow::{bail, Result};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// File name of the MPI-IO layer.
pub const MPIIO_LIBRARY: &str = "libpatio_mpiio.so";
/// The VOL connector, under `lib/patio/` (alone in its directory, which becomes
/// `HDF5_PLUGIN_PATH`: HDF5 loads every library of a plugin directory).
pub const VOL_LIBRARY: &str = "vol/libpatio_vol.so";
/// The connector and its info (everything passes to the native connector, value 0);
/// `patio.layout.vol.CONNECTOR` is the same string.
pub const VOL_CONNECTOR: &str = "patio under_vol=0;under_info={}";
/// File name of the layout core's C library the connector loads.
pub const LAYOUT_LIBRARY: &str = "libpatio_layout.so";
/// File name of the C library of reorganized files the layer loads.
pub const REORG_LIBRARY: &str = "libpatio_reorg.so";

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  patio run --hdf5 -- ./my_analysis run.h5\n      its H5Dread calls recorded in run.h5's layout knowledge base\n  patio run --mpiio -- mpirun -n 64 ./tile_reader data.bin\n      reads of data.bin served from its registered reorganized container\n  patio run --mpiio --stats run-stats -- mpirun -n 4 ./app\n      each rank writes what it served to run-stats/\n  patio run --mpiio --ordered -- mpirun -n 64 ./tile_reader data.bin\n      collective reads of data.bin's container taken in turns, in container order\n  mpirun -n 64 -x LD_PRELOAD=$(patio run --print-library) ./tile_reader data.bin\n      the same, passing the layer to ranks on other nodes\n\nA file is served only when `patio reorg status FILE` says its container matches; any\nother file, and every write, goes to the original untouched."
)]
pub struct Args {
    /// Preload the MPI-IO layer (libpatio_mpiio.so) into the command's processes.
    #[arg(long, required_unless_present_any = ["print_library", "hdf5"])]
    mpiio: bool,
    /// Load patio's HDF5 VOL connector (libpatio_vol.so) into the command: reads of
    /// files with a layout knowledge base are recorded (see `patio layout vol-env`).
    #[arg(long)]
    hdf5: bool,
    /// Prefetch each rank's independent reads with this policy (none, readahead, stride,
    /// markov, pattern): through the prefetch engine for files not served, as read-ahead
    /// from the container for served ones.
    #[arg(long, value_name = "POLICY")]
    prefetch: Option<String>,
    /// In collective reads of served files, issue the physical reads of all ranks one
    /// at a time in container order (the ranks take turns) instead of every rank at
    /// once: one sequential stream on disks where concurrent streams seek.
    #[arg(long)]
    ordered: bool,
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

/// `HDF5_PLUGIN_PATH` and `HDF5_VOL_CONNECTOR` for the VOL connector, and
/// `PATIO_LAYOUT_LIB` (the layout core it loads) unless the user set it.
fn vol_env() -> Result<Vec<(&'static str, OsString)>> {
    let vol = crate::install::find_library(VOL_LIBRARY, ".", "PATIO_VOL_LIB")?;
    let dir = vol
        .parent()
        .map(|d| d.as_os_str().to_owned())
        .unwrap_or_default();
    let mut env = vec![
        ("HDF5_PLUGIN_PATH", dir),
        ("HDF5_VOL_CONNECTOR", OsString::from(VOL_CONNECTOR)),
    ];
    if std::env::var_os("PATIO_LAYOUT_LIB").is_none() {
        if let Ok(core) =
            crate::install::find_library(LAYOUT_LIBRARY, "target/release", "PATIO_LAYOUT_LIB")
        {
            env.push(("PATIO_LAYOUT_LIB", core.into_os_string()));
        }
    }
    Ok(env)
}

pub fn run(args: Args) -> Result<u8> {
    if args.print_library {
        println!("{}", mpiio_layer()?.display());
        return Ok(0);
    }
    if !args.mpiio && !args.hdf5 {
        bail!("nothing to run under: give --mpiio or --hdf5");
    }
    let mut owned: Vec<(&str, OsString)> = Vec::new();
    if args.mpiio {
        let layer = mpiio_layer()?;
        owned.push(("LD_PRELOAD", crate::child::preload_with(&[layer])));
        for (var, path) in layer_library_env() {
            owned.push((var, path.into_os_string()));
        }
        if let Some(policy) = &args.prefetch {
            policy
                .parse::<patio_prefetch::PolicyKind>()
                .map_err(|e| anyhow::anyhow!("--prefetch: {e}"))?;
            owned.push(("PATIO_MPIIO_PREFETCH", OsString::from(policy)));
        }
        if args.ordered {
            owned.push(("PATIO_MPIIO_ORDER", OsString::from("1")));
        }
        if let Some(dir) = &args.stats {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            owned.push((
                "PATIO_MPIIO_STATS",
                std::path::absolute(dir)?.into_os_string(),
            ));
        }
    } else if args.prefetch.is_some() || args.stats.is_some() || args.ordered {
        bail!(
            "--prefetch, --ordered and --stats are options of the MPI-IO layer: give --mpiio too"
        );
    }
    if args.hdf5 {
        owned.extend(vol_env()?);
    }
    let env: Vec<(&str, Option<&OsStr>)> = owned
        .iter()
        .map(|(k, v)| (*k, Some(v.as_os_str())))
        .collect();
    let code = crate::child::run(&args.command, &env)?;
    Ok(code.clamp(0, 255) as u8)
}
