//! The container mount's background compaction: after a truncation or the close of
//! a file's writer, the file's backend directory is queued; one worker thread plans
//! (`patio_container::plan`: everything when the logs are larger than `dead_ratio` ×
//! the file plus `min_dead`; the small logs, data up to `small_log` bytes, when
//! there are more than `max_logs`) and compacts (`patio_container::compact_planned`;
//! a compaction someone else runs is waited for). A request waits [`SETTLE`] first,
//! so a burst of truncations or closes of one file is planned once. After a
//! truncation to zero and at the release of a file's last open handle the file is
//! *at rest*: its small logs are merged as soon as there are two (or one whose index
//! outweighs its data: a log appended to by one open and close after another), so a
//! small file nobody has open is one compact log set, while an N-1 checkpoint's
//! large per-process logs stay as written. A file is at rest only when it stays so
//! for [`REST`]: opening it again meanwhile leaves the thresholds alone to decide (a
//! program that reopens a file again and again writes on the same logs, see
//! `Writer::reuse`, and nothing is gained by merging between).
//!
//! Compaction takes only the logs of ended writers (writers still open hold a lock
//! on theirs), so requests never wait for it; readers the mount has built keep
//! reading the logs it replaces (they hold them open), and the next reader built
//! sees the compacted set. Failures do not reach applications: they are counted and
//! the first is reported when the mount ends.

use patio_container::compact::{compact_interleaved, compact_planned, plan, Stage, Thresholds};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a file must stay closed (or truncated to zero and not reopened) for the
/// compaction at rest.
pub(super) const REST: Duration = Duration::from_millis(100);

/// How long a request waits before the plan: the requests of a burst of truncations
/// or closes of one file (each asks) become one plan.
pub(super) const SETTLE: Duration = Duration::from_millis(20);

/// A queued directory: whether the file is at rest, and since when.
#[derive(Clone, Copy)]
struct Queued {
    at_rest: bool,
    since: Instant,
}

/// What the worker did.
#[derive(Default)]
pub(super) struct CompactionCounters {
    /// Compactions that replaced or removed logs.
    pub(super) runs: AtomicU64,
    /// Index logs replaced or removed.
    pub(super) logs: AtomicU64,
    /// Bytes of the replaced logs minus the bytes of their replacement.
    pub(super) reclaimed: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) first_error: Mutex<Option<String>>,
}

/// The queue and its worker thread (`None` when compaction is off).
pub(super) struct Compactor {
    thresholds: Option<Thresholds>,
    /// Queued directories.
    pending: Arc<Mutex<HashMap<PathBuf, Queued>>>,
    tx: Mutex<Option<mpsc::Sender<PathBuf>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    pub(super) counters: Arc<CompactionCounters>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Compactor {
    /// A compactor with `thresholds` (`None`: compaction off; no thread).
    pub(super) fn new(thresholds: Option<Thresholds>) -> Self {
        let pending: Arc<Mutex<HashMap<PathBuf, Queued>>> = Arc::default();
        let counters: Arc<CompactionCounters> = Arc::default();
        let (tx, worker) = match thresholds {
            Some(t) => {
                let (tx, rx) = mpsc::channel::<PathBuf>();
                let (pending, counters) = (pending.clone(), counters.clone());
                let worker = std::thread::Builder::new()
                    .name("patio-compact".into())
                    .spawn(move || {
                        for dir in rx {
                            let Some(queued) = lock(&pending).get(&dir).copied() else {
                                continue;
                            };
                            let wait = if queued.at_rest { REST } else { SETTLE };
                            std::thread::sleep(wait.saturating_sub(queued.since.elapsed()));
                            let Some(queued) = lock(&pending).remove(&dir) else {
                                continue;
                            };
                            run_one(&dir, queued.at_rest, &t, &counters);
                        }
                    })
                    .ok();
                (worker.is_some().then_some(tx), worker)
            }
            None => (None, None),
        };
        Compactor {
            thresholds,
            pending,
            tx: Mutex::new(tx),
            worker: Mutex::new(worker),
            counters,
        }
    }

    /// Queues `dir` (once, however often it is asked); `force`: the file is at rest.
    pub(super) fn request(&self, dir: &Path, force: bool) {
        if self.thresholds.is_none() {
            return;
        }
        let Some(tx) = lock(&self.tx).clone() else {
            return;
        };
        let mut pending = lock(&self.pending);
        match pending.get_mut(dir) {
            Some(q) => {
                if force && !q.at_rest {
                    q.since = Instant::now();
                }
                q.at_rest |= force;
            }
            None => {
                let queued = Queued {
                    at_rest: force,
                    since: Instant::now(),
                };
                pending.insert(dir.to_path_buf(), queued);
                let _ = tx.send(dir.to_path_buf());
            }
        }
    }

    /// The file at `dir` was opened: it is not at rest (a queued compaction goes by
    /// the thresholds alone).
    pub(super) fn opened(&self, dir: &Path) {
        if let Some(q) = lock(&self.pending).get_mut(dir) {
            q.at_rest = false;
        }
    }

    /// Lets the worker finish what is queued, then stops it.
    pub(super) fn stop(&self) {
        lock(&self.tx).take();
        if let Some(w) = lock(&self.worker).take() {
            let _ = w.join();
        }
    }
}

/// Fault injection for the crash tests: with `PATIO_TEST_KILL_COMPACTION_AT=N` in its
/// environment the mount kills itself (SIGKILL) when a compaction has done its N-th
/// durable step (`patio_container::compact`'s module documentation lists them).
const KILL_AT_ENV: &str = "PATIO_TEST_KILL_COMPACTION_AT";

fn run_one(dir: &Path, force: bool, t: &Thresholds, c: &CompactionCounters) {
    if !patio_container::layout::is_container(dir) {
        // Unlinked or renamed since it was queued.
        return;
    }
    let kill_at: Option<u64> = std::env::var(KILL_AT_ENV).ok().and_then(|v| v.parse().ok());
    let result = plan(dir, t, force).and_then(|p| match kill_at {
        None => compact_planned(dir, true, p).map(Some),
        Some(n) => compact_interleaved(dir, p, &mut |stage| {
            if stage == Stage::Step(n) {
                // SAFETY: kill(2) of this process; nothing to uphold.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
        })
        .map(Some),
    });
    match result {
        Ok(Some(done)) if done.sources > 0 => {
            c.runs.fetch_add(1, Ordering::Relaxed);
            c.logs.fetch_add(done.sources, Ordering::Relaxed);
            c.reclaimed.fetch_add(
                done.bytes_before.saturating_sub(done.bytes_after),
                Ordering::Relaxed,
            );
            log::info!(
                "compacted {}: {} index logs replaced, {} bytes before, {} after",
                dir.display(),
                done.sources,
                done.bytes_before,
                done.bytes_after
            );
        }
        Ok(_) => {}
        // Gone meanwhile (unlinked or renamed): nothing to report.
        Err(_) if !patio_container::layout::is_container(dir) => {}
        Err(e) => {
            log::warn!("compaction of {} failed: {e}", dir.display());
            c.errors.fetch_add(1, Ordering::Relaxed);
            lock(&c.first_error).get_or_insert_with(|| e.to_string());
        }
    }
}
