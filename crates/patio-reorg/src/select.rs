//! Choosing what a plan is about: the streams of one file in a trace (matched by path,
//! canonical path or unique base name), of one module (MPI-IO when the trace has it:
//! the application's own requests, not what the library made of them), as one
//! request list per process and operation.

use crate::error::{ReorgError, Result};
use patio_core::trace::{Op, Trace};
use std::collections::BTreeSet;
use std::path::Path;

/// Module preference when the trace has several for the file.
const MODULE_PREFERENCE: [&str; 2] = ["MPIIO", "POSIX"];

/// One process's requests on the file, in time order (empty requests dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub rank: i64,
    pub op: Op,
    pub requests: Vec<(u64, u64)>,
}

impl Process {
    /// `rank 3 read` — how messages and plans name a process.
    pub fn label(&self) -> String {
        format!("rank {} {}", self.rank, self.op.as_str())
    }
}

/// The part of a trace a plan looks at.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The file's name as the trace spells it.
    pub traced_file: String,
    pub module: String,
    pub processes: Vec<Process>,
}

/// What to pick out of a trace.
#[derive(Clone, Debug, Default)]
pub struct SelectOptions {
    /// The file's name in the trace, when it differs from the path on this machine.
    pub traced_name: Option<String>,
    /// The module to use (default: MPIIO, then POSIX, then the busiest).
    pub module: Option<String>,
}

fn base_name(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The trace's name for `file`.
fn match_file(trace: &Trace, file: &Path, opts: &SelectOptions) -> Result<String> {
    let names: BTreeSet<&str> = trace.streams.iter().map(|s| s.key.file.as_str()).collect();
    let shown = || {
        let mut v: Vec<&str> = names.iter().copied().take(5).collect();
        if names.len() > 5 {
            v.push("…");
        }
        if v.is_empty() {
            "no file".to_string()
        } else {
            v.join(", ")
        }
    };
    if let Some(name) = &opts.traced_name {
        return if names.contains(name.as_str()) {
            Ok(name.clone())
        } else {
            Err(ReorgError::FileNotInTrace {
                file: name.clone(),
                names: shown(),
            })
        };
    }
    let typed = file.to_string_lossy();
    if names.contains(typed.as_ref()) {
        return Ok(typed.into_owned());
    }
    if let Ok(canon) = std::fs::canonicalize(file) {
        let canon = canon.to_string_lossy().into_owned();
        if names.contains(canon.as_str()) {
            return Ok(canon);
        }
        let same: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| std::fs::canonicalize(n).is_ok_and(|c| c.to_string_lossy() == canon))
            .collect();
        if same.len() == 1 {
            return Ok(same[0].to_string());
        }
    }
    let base = base_name(&typed);
    let by_base: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| base_name(n) == base)
        .collect();
    if by_base.len() == 1 {
        return Ok(by_base[0].to_string());
    }
    Err(ReorgError::FileNotInTrace {
        file: file.display().to_string(),
        names: if by_base.len() > 1 {
            format!(
                "{} files named {base}: pick one with --trace-file",
                by_base.len()
            )
        } else {
            shown()
        },
    })
}

/// The processes of `trace` that access `file`, checked against the file's `size`.
pub fn select(trace: &Trace, file: &Path, size: u64, opts: &SelectOptions) -> Result<Selection> {
    let traced_file = match_file(trace, file, opts)?;
    let streams: Vec<_> = trace
        .streams
        .iter()
        .filter(|s| s.key.file == traced_file && !s.is_empty())
        .collect();
    let modules: BTreeSet<&str> = streams.iter().map(|s| s.key.module.as_str()).collect();
    let module = match &opts.module {
        Some(m) if modules.contains(m.as_str()) => m.clone(),
        Some(m) => {
            return Err(ReorgError::ModuleNotInTrace {
                module: m.clone(),
                file: traced_file,
                present: modules.into_iter().collect::<Vec<_>>().join(", "),
            })
        }
        None => MODULE_PREFERENCE
            .iter()
            .find(|m| modules.contains(*m))
            .map(|m| m.to_string())
            .or_else(|| {
                modules
                    .iter()
                    .max_by_key(|m| {
                        streams
                            .iter()
                            .filter(|s| s.key.module == **m)
                            .map(|s| s.len())
                            .sum::<usize>()
                    })
                    .map(|m| m.to_string())
            })
            .unwrap_or_default(),
    };
    let mut processes = Vec::new();
    for s in streams.iter().filter(|s| s.key.module == module) {
        let mut p = Process {
            rank: s.key.rank,
            op: s.key.op,
            requests: Vec::with_capacity(s.len()),
        };
        for (&offset, &len) in s.offsets.iter().zip(&s.lengths) {
            if len == 0 {
                continue;
            }
            if offset.checked_add(len).is_none_or(|end| end > size) {
                return Err(ReorgError::PastEnd {
                    file: file.display().to_string(),
                    process: format!("rank {}", s.key.rank),
                    op: s.key.op.as_str(),
                    offset,
                    len,
                    size,
                });
            }
            p.requests.push((offset, len));
        }
        if !p.requests.is_empty() {
            processes.push(p);
        }
    }
    Ok(Selection {
        traced_file,
        module,
        processes,
    })
}
