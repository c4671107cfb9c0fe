//! The prefetch engine's counters as `patio mount prefetch` and `patio replay` report
//! them: one JSON shape (flattened into each command's report) and one text layout.
//! Accuracy (used / prefetched bytes) is unknown when nothing was prefetched: `–` in
//! text, `null` in JSON.

use crate::report::{grouped, human_bytes, sig3};
use patio_prefetch::Stats;
use serde::Serialize;

/// The engine's counters, as JSON keys of the reports.
#[derive(Serialize, Clone, Debug)]
pub struct CountersJson {
    pub hits: u64,
    pub late_hits: u64,
    pub misses: u64,
    pub partial_hits: u64,
    /// Used / prefetched bytes; `null` when nothing was prefetched.
    pub accuracy: Option<f64>,
    pub coverage: f64,
    pub read_bytes: u64,
    pub cache_bytes: u64,
    pub demand_requests: u64,
    pub demand_bytes: u64,
    pub prefetch_requests: u64,
    pub prefetched_bytes: u64,
    pub used_bytes: u64,
    pub wasted_bytes: u64,
    pub backend_requests: u64,
    pub backend_bytes: u64,
    pub peak_cache_bytes: u64,
    pub cache_budget_bytes: u64,
    pub analyzer_ns_per_request: f64,
}

impl CountersJson {
    pub fn new(s: &Stats) -> Self {
        CountersJson {
            hits: s.hits,
            late_hits: s.late_hits,
            misses: s.misses,
            partial_hits: s.partial_hits,
            accuracy: s.accuracy(),
            coverage: s.coverage(),
            read_bytes: s.read_bytes,
            cache_bytes: s.cache_bytes,
            demand_requests: s.demand_requests,
            demand_bytes: s.demand_bytes,
            prefetch_requests: s.prefetch_requests,
            prefetched_bytes: s.prefetched_bytes,
            used_bytes: s.used_bytes,
            wasted_bytes: s.wasted_bytes,
            backend_requests: s.backend_requests,
            backend_bytes: s.backend_bytes,
            peak_cache_bytes: s.peak_cache_bytes,
            cache_budget_bytes: s.budget_bytes,
            analyzer_ns_per_request: s.analyzer_ns_per_request(),
        }
    }

    /// The counters as `(label, value)` lines of a text report.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "hits / late / misses",
                format!("{} / {} / {}", self.hits, self.late_hits, self.misses),
            ),
            ("accuracy", share(self.accuracy)),
            ("coverage", share(Some(self.coverage))),
            (
                "prefetched / wasted",
                format!(
                    "{} / {}",
                    human_bytes(self.prefetched_bytes),
                    human_bytes(self.wasted_bytes)
                ),
            ),
            (
                "backend",
                format!(
                    "{} requests, {}",
                    grouped(self.backend_requests),
                    human_bytes(self.backend_bytes)
                ),
            ),
            (
                "analyzer",
                format!("{} ns per request", sig3(self.analyzer_ns_per_request)),
            ),
        ]
    }
}

/// A share as a percentage with one decimal; `–` when unknown.
pub fn share(x: Option<f64>) -> String {
    match x {
        Some(x) => format!("{:.1}%", x * 100.0),
        None => "–".into(),
    }
}

/// Text lines `label  value`, labels padded to one width, each after `indent`.
pub fn aligned(lines: &[(&str, String)], indent: &str) -> String {
    let width = lines.iter().map(|l| l.0.len()).max().unwrap_or(0);
    lines
        .iter()
        .map(|(k, v)| format!("{indent}{k:<width$}  {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_is_unknown_until_something_is_prefetched() {
        let mut s = Stats::default();
        let c = CountersJson::new(&s);
        assert_eq!(c.accuracy, None);
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["accuracy"].is_null());
        let text = aligned(&c.lines(), "");
        assert!(text.contains("accuracy              –\n"), "{text}");
        s.prefetched_bytes = 4;
        s.used_bytes = 3;
        let c = CountersJson::new(&s);
        assert_eq!(c.accuracy, Some(0.75));
        assert_eq!(serde_json::to_value(&c).unwrap()["accuracy"], 0.75);
        assert!(aligned(&c.lines(), "").contains("accuracy              75.0%\n"));
    }
}
