//! `patio reorg register|status|unregister`: the registration that links a reorganized
//! container to its source file (patio_reorg::registry), so that a front end reading
//! the source by its path alone (the MPI-IO layer through libpatio_reorg.so) serves
//! it from the container while the source is still the version it was built from.

use crate::report::{human_bytes, write_stdout};
use anyhow::Result;
use patio_reorg::registry::{self, Registration, Status};
use patio_reorg::verify::register_checked;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct RegisterArgs {
    /// The source file the container serves (as programs name it).
    file: PathBuf,
    /// The reorganized container (made by `patio reorg apply`).
    container: PathBuf,
    /// 4 KiB blocks compared between FILE and the container besides the first and the last.
    #[arg(long, default_value_t = 64, value_name = "N")]
    samples: u64,
    /// Print the registration as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The source file.
    file: PathBuf,
    /// Print the status as JSON (a file with no registration: "container": null, exit 0).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct UnregisterArgs {
    /// The source file.
    file: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
pub struct RegistrationJson {
    file: String,
    registration: String,
    container: String,
    container_relative: bool,
    size: u64,
    registered_ns: u64,
}

pub fn registration_json(file: &Path, r: &Registration) -> RegistrationJson {
    RegistrationJson {
        file: file.display().to_string(),
        registration: r.path.display().to_string(),
        container: r.container.display().to_string(),
        container_relative: r.relative,
        size: r.version.size,
        registered_ns: r.created_ns,
    }
}

/// `register`: checks the container against FILE's bytes and registers it.
pub fn register(a: RegisterArgs) -> Result<()> {
    let r = register_checked(&a.file, &a.container, a.samples)?;
    if a.json {
        let j = registration_json(&a.file, &r);
        return write_stdout(&(serde_json::to_string_pretty(&j)? + "\n"));
    }
    write_stdout(&format!(
        "registered {} for {} ({}; recorded in {})\n",
        r.container.display(),
        a.file.display(),
        human_bytes(r.version.size),
        r.path.display()
    ))
}

#[derive(Serialize)]
struct StatusJson {
    file: String,
    registration: Option<String>,
    container: Option<String>,
    source_matches: bool,
    served: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    patterns: Option<u64>,
    index_records: Option<u64>,
    index_bytes: Option<u64>,
    registered_ns: Option<u64>,
}

/// Why `s` is not served, without the file's name in front (the report names it).
fn reason(file: &Path, s: &Status) -> Option<String> {
    let prefix = format!("{}: ", file.display());
    s.reason
        .as_deref()
        .map(|r| r.strip_prefix(&prefix).unwrap_or(r).to_string())
}

fn status_json(file: &Path, s: Option<&Status>) -> StatusJson {
    let reg = s.and_then(|s| s.registration.as_ref());
    StatusJson {
        file: file.display().to_string(),
        registration: reg.map(|r| r.path.display().to_string()),
        container: reg.map(|r| r.container.display().to_string()),
        source_matches: s.is_some_and(|s| s.source_matches),
        served: s.is_some_and(|s| s.served),
        reason: match s {
            Some(s) => reason(file, s),
            None => Some("no reorganized container is registered".into()),
        },
        patterns: s.and_then(|s| s.patterns),
        index_records: s.and_then(|s| s.index_records),
        index_bytes: s.and_then(|s| s.index_bytes),
        registered_ns: reg.map(|r| r.created_ns),
    }
}

/// `status`: whether FILE is served from its registered container, and why not.
pub fn status(a: StatusArgs) -> Result<()> {
    let s = registry::status(&a.file)?;
    if a.json {
        let j = status_json(&a.file, s.as_ref());
        return write_stdout(&(serde_json::to_string_pretty(&j)? + "\n"));
    }
    let Some(s) = s else {
        anyhow::bail!(
            "{}: no reorganized container is registered (`patio reorg apply` or `patio reorg register` make one)",
            a.file.display()
        );
    };
    let container = s
        .registration
        .as_ref()
        .map_or_else(|| "?".into(), |r| r.container.display().to_string());
    let index = match (s.patterns, s.index_bytes) {
        (Some(p), Some(b)) => format!(
            " ({p} pattern{}, index {})",
            if p == 1 { "" } else { "s" },
            human_bytes(b)
        ),
        _ => String::new(),
    };
    if s.served {
        write_stdout(&format!(
            "{}: served from {container}{index}\n",
            a.file.display()
        ))
    } else {
        write_stdout(&format!(
            "{}: registered {container}{index}, not served: {}\n",
            a.file.display(),
            reason(&a.file, &s).unwrap_or_default()
        ))
    }
}

/// `unregister`: removes FILE's registration (nothing to do when there is none).
pub fn unregister(a: UnregisterArgs) -> Result<()> {
    let path = registry::registration_path(&a.file)?;
    let removed = registry::unregister(&a.file)?;
    if a.json {
        let j = serde_json::json!({
            "file": a.file.display().to_string(),
            "registration": path.display().to_string(),
            "removed": removed,
        });
        return write_stdout(&(serde_json::to_string_pretty(&j)? + "\n"));
    }
    if removed {
        write_stdout(&format!("removed {}\n", path.display()))
    } else {
        write_stdout(&format!(
            "{}: no registration (nothing removed)\n",
            a.file.display()
        ))
    }
}
