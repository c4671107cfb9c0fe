//! Trace-driven replay (section 5 of the pattern-detection paper): the read requests
//! of one or more streams, in time order, are issued against a data file through the
//! engine, with a compute gap after each request.
//!
//! * **Compute gap** = `compute_ratio ×` the mean no-prefetch latency, which is the
//!   slow store's modelled cost `latency + bytes / bandwidth` averaged over the
//!   replayed requests (without jitter). The gap sleeps or spins
//!   ([`Compute`]); sleeping leaves the cores to the workers, spinning occupies one.
//! * **I/O time** is the time the replayer spent inside reads (what the application
//!   waits for: cache copies, waits on late prefetches, backend reads and the
//!   analyzer); **total time** adds the compute gaps. Both exclude the optional
//!   verification of every read against the file.
//! * Each stream gets its own policy; all share one engine, so one cache budget and
//!   one worker pool, as the streams of one process would.
//! * **Per-read records** ([`ReplayConfig::record_reads`]): each read's outcome (hit,
//!   late hit, miss) and the time the replayer spent in it, to see which requests one
//!   policy misses or waits for that another serves (`patio replay --reads-csv`).

use crate::backend::{DataFile, SlowStore, StoreConfig};
use crate::engine::{Engine, EngineConfig, Stats};
use crate::error::{PrefetchError, Result};
use crate::policy::{Policy, PolicyKind};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// One read request of the replay, of stream `stream` (index into the policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub stream: usize,
    pub offset: u64,
    pub len: u64,
}

/// What the replayer does between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compute {
    Sleep,
    Spin,
}

impl std::fmt::Display for Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compute::Sleep => "sleep",
            Compute::Spin => "spin",
        })
    }
}

/// Parameters of a replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub store: StoreConfig,
    pub engine: EngineConfig,
    /// Compute between requests, as a multiple of the mean no-prefetch latency.
    pub compute_ratio: f64,
    pub compute: Compute,
    /// Compare every read with the file (outside the timed regions).
    pub verify: bool,
    /// Keep one [`ReadRecord`] per request in the report.
    pub record_reads: bool,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            store: StoreConfig::default(),
            engine: EngineConfig::default(),
            compute_ratio: 1.0,
            compute: Compute::Sleep,
            verify: false,
            record_reads: false,
        }
    }
}

/// How one read was served (the engine's classification, [`Stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every byte was ready in the cache.
    Hit,
    /// The read waited for a prefetch in flight (or took over a queued one).
    Late,
    /// Some byte came from the backend.
    Miss,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Late => "late",
            Outcome::Miss => "miss",
        }
    }
}

/// One replayed read: its request, how it was served and the time spent in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadRecord {
    pub request: Request,
    pub outcome: Outcome,
    pub io_time: Duration,
}

/// What a replay measured.
#[derive(Clone, Debug)]
pub struct Report {
    pub policy: String,
    pub streams: usize,
    pub requests: u64,
    pub io_time: Duration,
    pub total_time: Duration,
    /// Time actually spent in the compute gaps (sleeps overshoot a little).
    pub compute_time: Duration,
    /// Mean modelled no-prefetch latency and the compute gap derived from it.
    pub mean_latency: Duration,
    pub compute_gap: Duration,
    pub stats: Stats,
    /// Policy state at the end, summed over streams, and the largest per stream.
    pub model_bytes: u64,
    pub max_stream_model_bytes: u64,
    /// The models the policies would save (per stream), if they learn one.
    pub models: Vec<Option<Vec<u8>>>,
    /// How the data file was read (`O_DIRECT` or the buffered fallback).
    pub io_mode: String,
    /// One record per request, in replay order, when [`ReplayConfig::record_reads`].
    pub reads: Vec<ReadRecord>,
}

impl Report {
    /// Size of the saved models, summed over streams.
    pub fn saved_model_bytes(&self) -> u64 {
        self.models.iter().flatten().map(|m| m.len() as u64).sum()
    }
}

fn invalid(msg: String) -> PrefetchError {
    PrefetchError::Invalid(msg)
}

fn read_error(data: &std::path::Display<'_>, r: &Request, e: std::io::Error) -> PrefetchError {
    PrefetchError::io(
        format!("{data}: read of {} bytes at {}", r.len, r.offset),
        e,
    )
}

/// The mean modelled cost of the requests under `store`, without jitter.
pub fn mean_latency(requests: &[Request], store: &StoreConfig) -> Duration {
    if requests.is_empty() {
        return Duration::ZERO;
    }
    let total: f64 = requests
        .iter()
        .map(|r| store.cost(r.len).as_secs_f64())
        .sum();
    Duration::from_secs_f64(total / requests.len() as f64)
}

/// Checks that the requests can be replayed against a file of `size` bytes.
pub fn check(requests: &[Request], streams: usize, data: &Path, size: u64) -> Result<()> {
    if requests.is_empty() {
        return Err(invalid("the trace has no read requests to replay".into()));
    }
    if let Some(r) = requests.iter().find(|r| r.stream >= streams) {
        return Err(invalid(format!(
            "request of stream {} without a policy",
            r.stream
        )));
    }
    let extent = requests
        .iter()
        .map(|r| r.offset.saturating_add(r.len))
        .max()
        .unwrap_or(0);
    if extent > size {
        return Err(invalid(format!(
            "{}: data file has {size} bytes but the trace reads up to byte {extent}",
            data.display()
        )));
    }
    Ok(())
}

/// One policy per stream; `oracle` gets each stream's own requests, `models` (one
/// per stream) are loaded by the policies that learn.
pub fn policies(
    kind: PolicyKind,
    requests: &[Request],
    streams: usize,
    models: Option<&[Vec<u8>]>,
) -> Result<Vec<Box<dyn Policy>>> {
    if let Some(m) = models {
        if m.len() != streams {
            return Err(invalid(format!(
                "the model file holds {} stream models, the replay has {streams} streams",
                m.len()
            )));
        }
    }
    (0..streams)
        .map(|s| {
            let future: Vec<(u64, u64)> = if kind == PolicyKind::Oracle {
                requests
                    .iter()
                    .filter(|r| r.stream == s)
                    .map(|r| (r.offset, r.len))
                    .collect()
            } else {
                Vec::new()
            };
            let model = models.map(|m| m[s].as_slice()).filter(|m| !m.is_empty());
            kind.build(&future, model)
        })
        .collect()
}

/// Replays `requests` against `data` with one policy per stream.
pub fn replay(
    data: &Path,
    requests: &[Request],
    policies: Vec<Box<dyn Policy>>,
    config: &ReplayConfig,
) -> Result<Report> {
    let shown = data.display();
    let size = std::fs::metadata(data)
        .map_err(|e| PrefetchError::io(shown.to_string(), e))?
        .len();
    check(requests, policies.len(), data, size)?;
    let policy = policies
        .first()
        .map(|p| p.name().to_string())
        .unwrap_or_default();
    let streams = policies.len();
    let mean = mean_latency(requests, &config.store);
    let gap = mean.mul_f64(config.compute_ratio.max(0.0));

    let engine = Engine::new(config.engine.clone());
    let file = DataFile::open(data, SlowStore::new(config.store.clone()))
        .map_err(|e| PrefetchError::io(format!("cannot open {shown}"), e))?;
    let file = engine.add_file(file);
    let io_mode = file.file().io_mode().to_string();
    let mut readers: Vec<_> = policies
        .into_iter()
        .map(|p| engine.stream(&file, p))
        .collect();
    let reference = if config.verify {
        Some(std::fs::File::open(data).map_err(|e| PrefetchError::io(shown.to_string(), e))?)
    } else {
        None
    };
    let max_len = requests.iter().map(|r| r.len).max().unwrap_or(0) as usize;
    let (mut buf, mut want) = (vec![0u8; max_len], vec![0u8; max_len]);

    let mut reads = Vec::new();
    // Each stream's misses and late hits after its previous read.
    let mut seen = vec![(0u64, 0u64); streams];
    let start = Instant::now();
    let (mut io_time, mut excluded, mut compute_time) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for (i, r) in requests.iter().enumerate() {
        let len = r.len as usize;
        let t = Instant::now();
        let got = readers[r.stream]
            .read_at(r.offset, &mut buf[..len])
            .map_err(|e| read_error(&shown, r, e))?;
        let spent = t.elapsed();
        io_time += spent;
        if config.record_reads {
            let v = Instant::now();
            let after = readers[r.stream].stats();
            let before = std::mem::replace(&mut seen[r.stream], (after.misses, after.late_hits));
            let outcome = if after.misses > before.0 {
                Outcome::Miss
            } else if after.late_hits > before.1 {
                Outcome::Late
            } else {
                Outcome::Hit
            };
            reads.push(ReadRecord {
                request: *r,
                outcome,
                io_time: spent,
            });
            excluded += v.elapsed();
        }
        if let Some(f) = &reference {
            let v = Instant::now();
            f.read_exact_at(&mut want[..len], r.offset)
                .map_err(|e| read_error(&shown, r, e))?;
            if got != len || buf[..len] != want[..len] {
                return Err(PrefetchError::Failed(format!(
                    "request {i} ({} bytes at {}) returned wrong data with policy {policy}",
                    r.len, r.offset
                )));
            }
            excluded += v.elapsed();
        }
        if i + 1 < requests.len() {
            let c = Instant::now();
            compute(gap, config.compute);
            compute_time += c.elapsed();
        }
    }
    let total_time = start.elapsed().saturating_sub(excluded);

    let model_sizes: Vec<u64> = readers
        .iter()
        .map(|r| r.policy().model_bytes() as u64)
        .collect();
    let models = readers.iter().map(|r| r.policy().save()).collect();
    drop(readers);
    let stats = engine.quiesce();
    Ok(Report {
        policy,
        streams,
        requests: requests.len() as u64,
        io_time,
        total_time,
        compute_time,
        mean_latency: mean,
        compute_gap: gap,
        stats,
        model_bytes: model_sizes.iter().sum(),
        max_stream_model_bytes: model_sizes.iter().copied().max().unwrap_or(0),
        models,
        io_mode,
        reads,
    })
}

/// Computes for `d`: sleeping, or spinning on the clock.
fn compute(d: Duration, how: Compute) {
    if d.is_zero() {
        return;
    }
    match how {
        Compute::Sleep => std::thread::sleep(d),
        Compute::Spin => {
            let until = Instant::now() + d;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_latency_is_the_model_cost() {
        let store = StoreConfig::with(2.0, 100.0);
        let reqs = [
            Request {
                stream: 0,
                offset: 0,
                len: 100_000,
            },
            Request {
                stream: 0,
                offset: 0,
                len: 300_000,
            },
        ];
        assert_eq!(mean_latency(&reqs, &store), Duration::from_millis(4));
    }
}
