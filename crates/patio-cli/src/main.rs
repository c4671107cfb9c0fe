//! The `patio` command. Each subcommand lives in its own module; this file only
//! parses arguments and turns errors into one-line messages with a non-zero exit.

mod analyze;
mod bench;
mod cache_cmd;
mod child;
mod container;
mod counters;
mod generic;
mod install;
mod load;
mod logging;
mod mount;
mod mount_json;
mod mount_stat;
mod python;
mod query;
mod reorg;
mod replay;
mod report;
mod retired;
mod run_cmd;
mod shell_cmd;
mod size_arg;
mod store_args;
mod store_cmd;
mod trace_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// patio — PATtern-aware I/O: find the structure in I/O request streams.
#[derive(Parser)]
#[command(
    name = "patio",
    version,
    about = "patio — PATtern-aware I/O: find the structure in I/O request streams",
    after_help = "Examples:\n  patio analyze run.darshan --plot run.png   report every stream's pattern and draw it\n  patio analyze trace.csv --json             the same as JSON\n  patio convert run.darshan -o run.ptrace    keep a compact native copy of a trace\n  patio bench lookup                         pattern map vs extent table\n\nDocumentation: `patio COMMAND --help`; man pages with `patio man -o DIR`; docs/CLI.md in the source"
)]
struct Cli {
    /// More diagnostics on stderr (or a mount's --log file): -v info, -vv debug,
    /// -vvv trace. Without it, the level of PATIO_LOG (off, error, warn, info, debug,
    /// trace; default warn).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Report the access pattern of every stream of a trace (.darshan, .csv or native .ptrace).
    Analyze(analyze::Args),
    /// AMR (Chombo) box layouts: `amr inspect|advise|reorder|read` (see `patio amr --help`).
    Amr(python::Passthrough),
    /// Benchmarks: pattern map vs extent table, detector throughput, index compression.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Segment-grouping cache directories: `cache stat DIR` (see `patio mount cache`).
    #[command(subcommand)]
    Cache(cache_cmd::CacheCommand),
    /// Pattern-indexed containers: `container stat|map|check|flatten PATH`.
    #[command(subcommand)]
    Container(container::ContainerCommand),
    /// Write the shell completion script for bash, zsh, fish, elvish or powershell to stdout.
    Completions(shell_cmd::CompletionsArgs),
    /// Convert a trace between formats (.darshan, .csv, .ptrace in; .csv or .ptrace out).
    Convert(load::ConvertArgs),
    /// FUSE mounts: `mount trace` records every request made through a passthrough mount; `mount prefetch` serves its reads through the prefetch engine; `mount container` stores files as pattern-indexed containers; `mount cache` caches reads in grouped segments on local disk.
    #[command(subcommand)]
    Mount(mount::MountCommand),
    /// Write man pages for patio and every subcommand into a directory.
    Man(shell_cmd::ManArgs),
    /// HDF5 layout optimization: `layout status|advise|build|learn|evict|probe` (see `patio layout --help`).
    Layout(python::Passthrough),
    /// One stream's requests, one request, or the requests touching an offset, decoding only the blocks that hold them (JSON with --json).
    Query(query::Args),
    /// Pattern-aware file reorganization: `reorg plan TRACE --file F`, `reorg apply TRACE --file F -o OUT` (see `patio reorg --help`).
    #[command(subcommand)]
    Reorg(reorg::ReorgCommand),
    /// Replay a trace's reads against a data file through the prefetch engine (none, readahead, stride, markov, pattern, oracle).
    Replay(replay::Args),
    /// Run an unmodified program with patio's MPI-IO layer (`run --mpiio -- mpirun -n N ./app` serves reads of reorganized files from their containers) or HDF5 VOL connector (`run --hdf5 -- ./app run.h5` records its reads).
    Run(run_cmd::Args),
    /// The striped storage model of this machine: `store probe [--dir D]` measures and saves it (`--store probed`).
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// Trace a command's file I/O (LD_PRELOAD): `trace -- CMD`, `trace merge DIR -o T`, `trace convert`.
    Trace(trace_cmd::Args),
}

/// The exit code of a command that reports its own errors, or this command's error.
fn exit_code(result: anyhow::Result<u8>) -> ExitCode {
    result.map(ExitCode::from).unwrap_or_else(|e| {
        eprintln!("patio: error: {e:#}");
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = logging::init(cli.verbose) {
        eprintln!("patio: error: {e:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Amr(args) => return exit_code(python::exec_helper("amr", &args)),
        Command::Analyze(args) => analyze::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Cache(cmd) => cache_cmd::run(cmd),
        Command::Container(cmd) => container::run(cmd),
        Command::Completions(args) => shell_cmd::completions::<Cli>(args),
        Command::Convert(args) => load::convert(args),
        Command::Mount(cmd) => mount::run(cmd),
        Command::Man(args) => shell_cmd::man::<Cli>(args),
        Command::Layout(args) => return exit_code(python::exec_helper("layout", &args)),
        Command::Query(args) => query::run(args),
        Command::Reorg(cmd) => reorg::run(cmd),
        Command::Replay(args) => replay::run(args),
        Command::Run(args) => return exit_code(run_cmd::run(args)),
        Command::Store(cmd) => store_cmd::run(cmd),
        Command::Trace(args) => trace_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            if e.chain().any(|c| c.is::<python::HelperReported>()) {
                return ExitCode::from(2);
            }
            eprintln!("patio: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
