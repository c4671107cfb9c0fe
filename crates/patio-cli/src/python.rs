//! Running patio's Python helpers (`python -m patio.…`) from the CLI: reading Darshan
//! logs needs PyDarshan and plots need matplotlib, both of which live in the
//! project's virtual environment next to the `patio` binary.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python interpreter to use: `$PATIO_PYTHON`, else the `python3` beside the
/// `patio` that was invoked (the virtual environment's bin/), else `$VIRTUAL_ENV`'s,
/// else the `.venv` of the checkout the binary was built from, else `python3` from PATH.
fn interpreter() -> PathBuf {
    if let Some(p) = std::env::var_os("PATIO_PYTHON") {
        return PathBuf::from(p);
    }
    let beside_invoked = invoked_dir();
    let venv = std::env::var_os("VIRTUAL_ENV").map(|v| PathBuf::from(v).join("bin"));
    // The virtual environment of the checkout this binary was built from.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin");
    for dir in beside_invoked
        .into_iter()
        .chain(venv)
        .chain(std::iter::once(checkout))
    {
        let candidate = dir.join("python3");
        if candidate.exists() {
            return candidate;
        }
    }
    PathBuf::from("python3")
}

/// The directory of the `patio` that was invoked (as typed, before symlinks are
/// resolved: `.venv/bin` for the venv's link to the release binary).
pub fn invoked_dir() -> Option<PathBuf> {
    let argv0 = PathBuf::from(std::env::args_os().next()?);
    if argv0.components().count() > 1 {
        argv0.parent().map(Path::to_path_buf)
    } else {
        which_dir(&argv0)
    }
}

fn which_dir(name: &Path) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| d.join(name).is_file())
}

/// Runs helper `name` (`dxt` or `plot`) as `python -m patio._run NAME ARGS…`; the
/// helper prints its own one-line errors to stderr, which are passed through.
pub fn run_helper(name: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
    let python = interpreter();
    // The package source of this checkout, used when patio is not installed in the
    // interpreter (e.g. a plain `cargo run`).
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let mut pythonpath = std::env::var_os("PYTHONPATH").unwrap_or_default();
    if source.is_dir() {
        let mut paths: Vec<PathBuf> = std::env::split_paths(&pythonpath).collect();
        paths.push(source);
        pythonpath = std::env::join_paths(paths).unwrap_or_default();
    }
    let status = Command::new(&python)
        .args(["-m", "patio._run", name])
        .args(args)
        .env("PYTHONPATH", pythonpath)
        .status()
        .with_context(|| {
            format!(
                "could not run {} (set PATIO_PYTHON to the project's venv python)",
                python.display()
            )
        })?;
    if !status.success() {
        bail!("the {name} helper failed (see the message above)");
    }
    Ok(())
}
