//! The counters of the trace and container mounts as JSON: what `--stats-json` holds
//! when the mount ends and what `patio mount stat --json` prints while it runs.

use crate::mount::ended_text;
use patio_fs::container::{ContainerSummary, IndexMode};
use patio_fs::tracing::TraceSummary;
use serde::Serialize;
use std::path::Path;

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
