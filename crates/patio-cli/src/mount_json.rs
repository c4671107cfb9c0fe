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

/// The counters of `patio mount container` (the fields of its summary).
#[derive(Serialize, Clone, Debug)]
pub struct ContainerStatsJson {
    pub index: String,
    pub files: u64,
    pub writers: u64,
    pub flushed_at_unmount: u64,
    pub writes: u64,
    pub written_bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub reader_builds: u64,
    pub reader_merges: u64,
    pub truncations: u64,
    pub compactions: u64,
    pub compacted_logs: u64,
    pub reclaimed_bytes: u64,
    pub compaction_errors: u64,
    pub first_compaction_error: Option<String>,
    pub failures: u64,
    pub first_failure: Option<String>,
    pub ended: String,
}

impl ContainerStatsJson {
    pub fn new(index: IndexMode, s: &ContainerSummary) -> Self {
        ContainerStatsJson {
            index: index.name().into(),
            files: s.files,
            writers: s.writers,
            flushed_at_unmount: s.flushed_at_unmount,
            writes: s.writes,
            written_bytes: s.written_bytes,
            reads: s.reads,
            read_bytes: s.read_bytes,
            reader_builds: s.reader_builds,
            reader_merges: s.reader_merges,
            truncations: s.truncations,
            compactions: s.compactions,
            compacted_logs: s.compacted_logs,
            reclaimed_bytes: s.reclaimed_bytes,
            compaction_errors: s.compaction_errors,
            first_compaction_error: s.first_compaction_error.clone(),
            failures: s.failures,
            first_failure: s.first_failure.clone(),
            ended: ended_text(s.ended).into(),
        }
    }
}
