//! Where patio's parts are, found from the running binary and never from paths compiled
//! in at build time, so that one `patio` works wherever it is installed:
//!
//! * installed (a wheel, `pip install`): `PREFIX/bin/patio` beside `PREFIX/bin/python3`,
//!   the tracer and the layout core's C library in `PREFIX/lib/patio/`, the header in
//!   `PREFIX/include/patio/`, the Python package importable by that interpreter;
//! * a checkout (`scripts/setup.sh`): `.venv/bin/patio` is a link to
//!   `target/release/patio`, and the venv is laid out as an installed prefix; a binary
//!   run straight from `CHECKOUT/target/<profile>/` finds the checkout's `.venv/`,
//!   `python/` and `capture/` two directories up.

use std::path::{Path, PathBuf};

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

/// The directory of the executable itself, symlinks resolved.
fn executable_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()?
        .canonicalize()
        .ok()?
        .parent()
        .map(Path::to_path_buf)
}

/// The checkout this binary was built in, when it runs from `CHECKOUT/target/<profile>/`
/// (recognised by the checkout's `python/patio/` package beside `target/`).
pub fn checkout() -> Option<PathBuf> {
    let root = executable_dir()?.parent()?.parent()?.to_path_buf();
    root.join("python/patio/__init__.py")
        .is_file()
        .then_some(root)
}

/// The installation prefixes to look in, most specific first: the parent of the `bin/`
/// the user invoked `patio` from, then that of the real executable.
pub fn prefixes() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in invoked_dir().into_iter().chain(executable_dir()) {
        if let Some(prefix) = dir.parent() {
            if !found.iter().any(|p| p == prefix) {
                found.push(prefix.to_path_buf());
            }
        }
    }
    found
}

/// The Python interpreter for patio's Python front ends: `$PATIO_PYTHON`, else the
/// `python3` beside the `patio` that was invoked (the environment it was installed
/// into), else `$VIRTUAL_ENV`'s, else the checkout's `.venv`, else `python3` from PATH.
pub fn interpreter() -> PathBuf {
    if let Some(p) = std::env::var_os("PATIO_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = std::env::var_os("VIRTUAL_ENV").map(|v| PathBuf::from(v).join("bin"));
    let checkout_venv = checkout().map(|c| c.join(".venv/bin"));
    invoked_dir()
        .into_iter()
        .chain(venv)
        .chain(checkout_venv)
        .map(|dir| dir.join("python3"))
        .find(|candidate| candidate.exists())
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// The package source to put on `PYTHONPATH` when the binary runs from a checkout (so a
/// plain `cargo run` finds `patio.…` without an installed package); `None` when installed.
pub fn python_source() -> Option<PathBuf> {
    checkout().map(|c| c.join("python")).filter(|p| p.is_dir())
}

/// Where a shared library shipped with patio (`libpatio_trace.so`, `libpatio_layout.so`)
/// may be, in order: `PREFIX/lib/patio/NAME` for every prefix, then the checkout's build
/// location `checkout_subdir` (e.g. `capture`).
pub fn library_candidates(name: &str, checkout_subdir: &str) -> Vec<PathBuf> {
    prefixes()
        .into_iter()
        .map(|prefix| prefix.join("lib/patio").join(name))
        .chain(checkout().map(|c| c.join(checkout_subdir).join(name)))
        .collect()
}

/// The shared library `name` to load into a user's program: the file `$override_var`
/// names when set, else the first of [`library_candidates`]; an absolute, symlink-free
/// path. The error says where it looked.
pub fn find_library(
    name: &str,
    checkout_subdir: &str,
    override_var: &str,
) -> anyhow::Result<PathBuf> {
    use anyhow::{bail, Context};
    let absolute = |p: &Path| {
        p.canonicalize()
            .with_context(|| format!("cannot resolve {}", p.display()))
    };
    if let Some(p) = std::env::var_os(override_var) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{override_var}={} does not exist", p.display());
        }
        return absolute(&p);
    }
    let candidates = library_candidates(name, checkout_subdir);
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => absolute(found),
        None => bail!(
            "{name} was not found (looked at {}); reinstall patio, run scripts/setup.sh in a checkout, or set {override_var}",
            candidates
                .iter()
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
