//! Running patio's Python helpers (`python -m patio.…`) from the CLI: reading Darshan
//! logs needs PyDarshan and plots need matplotlib, both of which live in the
//! project's virtual environment next to the `patio` binary.

use crate::install::{interpreter, python_source};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs helper `name` (`dxt` or `plot`) as `python -m patio._run NAME ARGS…`; the
/// helper prints its own one-line errors to stderr, which are passed through.
pub fn run_helper(name: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
    let status = helper_command(name)
        .args(args)
        .status()
        .with_context(|| could_not_run(&interpreter()))?;
    match status.code() {
        Some(0) => Ok(()),
        // Exit status 2: the helper printed its own one-line `patio: error:` message.
        Some(2) => Err(anyhow::Error::new(HelperReported)),
        _ => bail!("the {name} helper failed ({status})"),
    }
}

/// A Python helper failed after printing its own one-line message: the command exits
/// non-zero without adding a second line about the same failure.
#[derive(Debug)]
pub struct HelperReported;

impl std::fmt::Display for HelperReported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the Python helper failed (its message is above)")
    }
}

impl std::error::Error for HelperReported {}

/// `python -m patio._run NAME`, with the checkout's package source on PYTHONPATH when the
/// binary runs from one (a plain `cargo run`, where patio need not be installed).
fn helper_command(name: &str) -> Command {
    let python = interpreter();
    let mut pythonpath = std::env::var_os("PYTHONPATH").unwrap_or_default();
    if let Some(source) = python_source() {
        let mut paths: Vec<PathBuf> = std::env::split_paths(&pythonpath).collect();
        paths.push(source);
        pythonpath = std::env::join_paths(paths).unwrap_or_default();
    }
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "patio._run", name])
        .env("PYTHONPATH", pythonpath);
    ends_with_parent(&mut cmd);
    cmd
}

/// Makes the child get SIGTERM when this process dies (a `patio` killed with SIGKILL
/// takes its Python worker with it instead of leaving it to run to completion).
fn ends_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the request took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

fn could_not_run(python: &Path) -> String {
    format!(
        "could not run {} (set PATIO_PYTHON to the project's venv python)",
        python.display()
    )
}

/// Arguments handed unparsed to a Python front end (`patio layout …`, `patio bench
/// layout …`), which has its own `--help`.
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct Passthrough {
    /// Arguments of the Python command (see its `--help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// Runs helper `name` with `args` and exits as it exits: the helper prints its own
/// output and one-line errors, so nothing is added here.
pub fn exec_helper(name: &str, args: &Passthrough) -> Result<u8> {
    let status = helper_command(name)
        .args(&args.args)
        .status()
        .with_context(|| could_not_run(&interpreter()))?;
    Ok(status.code().unwrap_or(2).clamp(0, 255) as u8)
}
