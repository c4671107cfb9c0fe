//! How every mount reports its counters when it ends (`--stats-json FILE`, `--json`, or
//! the text report on stderr), and the counters of the trace and container mounts as
//! JSON: what `--stats-json` holds when the mount ends and what `patio mount stat --json`
//! prints while it runs.

use crate::mount::ended_text;
use anyhow::{Context, Result};
use patio_fs::container::{ContainerSummary, IndexMode};
use patio_fs::tracing::TraceSummary;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where a mount's counters go when it ends, the same options on every mount.
#[derive(clap::Args, Clone, Debug)]
pub struct EndReport {
    /// Write the counters as JSON to FILE when the mount ends.
    #[arg(long, value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Print the counters as JSON on stdout when the mount ends, instead of the report
    /// on stderr.
    #[arg(long)]
    pub json: bool,
}

impl EndReport {
    /// Reports `counters` at the end of a mount: to `--stats-json` when given, then as
    /// JSON on stdout with `--json`, else `text` on stderr (stdout carries only JSON).
    pub fn finish<T: Serialize>(&self, counters: &T, text: &str) -> Result<()> {
        let json = serde_json::to_string_pretty(counters)? + "\n";
        if let Some(path) = &self.stats_json {
            std::fs::write(path, &json)
                .with_context(|| format!("cannot write statistics {}", path.display()))?;
        }
        if self.json {
            return crate::report::write_stdout(&json);
        }
        eprint!("{text}");
        Ok(())
    }
}

/// The counters of `patio mount trace`.
#[derive(Serialize, Clone, Debug)]
pub struct TraceStatsJson {
    /// The trace written when the mount ends.
    pub output: String,
    /// Requests recorded, their streams (file, process, op), the files they went to and
    /// the bytes they moved.
    pub requests: u64,
    pub streams: u64,
    pub files: u64,
    pub bytes: u64,
    pub ended: String,
}

impl TraceStatsJson {
    pub fn new(output: &Path, s: &TraceSummary) -> Self {
        TraceStatsJson {
            output: output.display().to_string(),
            requests: s.requests as u64,
            streams: s.streams as u64,
            files: s.files as u64,
            bytes: s.bytes,
            ended: ended_text(s.ended).into(),
        }
    }
}

/// The counters of `patio mount container`: its summary's counters, with the index
/// mode first and how it ended last.
#[derive(Serialize, Clone, Debug)]
pub struct ContainerStatsJson<'a> {
    pub index: &'static str,
    #[serde(flatten)]
    pub summary: &'a ContainerSummary,
    pub ended: &'static str,
}

impl<'a> ContainerStatsJson<'a> {
    pub fn new(index: IndexMode, s: &'a ContainerSummary) -> Self {
        ContainerStatsJson {
            index: index.name(),
            summary: s,
            ended: ended_text(s.ended),
        }
    }
}
