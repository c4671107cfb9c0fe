//! The prefetch engine: per-stream readers consult their policy on every read,
//! worker threads fill the shared cache with what the policies predict, and reads are
//! served from the cache or fall through to the backend.
//!
//! ```text
//!  StreamReader::read_at ─► policy.observe ─► hints ─► cache.reserve ─► job queue ─► workers ─► DataFile (slow store)
//!          │                                                                            │
//!          └─► cache.take: ready (hit) / filling (wait: late hit) / missing (backend) ◄─┘ cache.complete
//! ```
//!
//! * **One engine, many files and streams.** Files are added with
//!   [`Engine::add_file`]; each stream of reads (an open file handle, a replayed trace
//!   stream) gets a [`StreamReader`] with its own policy. All share one cache budget,
//!   one worker pool and the backend's concurrency limit.
//! * **Reads are byte-exact** whatever the policy: every byte comes either from a
//!   prefetch of exactly that range of the file or from the file itself; reads past
//!   the end return fewer bytes (none at or after it), like `pread`.
//! * **Depth adapts** per stream: the policy is asked for `depth` requests ahead;
//!   depth grows by one whenever a read had to wait for (or take over) a prefetch that
//!   was still in flight (late), and halves when prefetched bytes of the stream were
//!   wasted (at most once per `depth` reads). Hints below [`EngineConfig::min_confidence`] are not issued, so a
//!   stream that stops matching its pattern stops prefetching.
//! * **Expiry.** A prefetch a stream has not touched within `2·max(depth, reads) + 4`
//!   of its own reads (`reads`: when the policy expected it to be read,
//!   [`Hint::reads`]) is dropped as waste (the stream went elsewhere), freeing the
//!   budget.
//! * **Confidence.** The default threshold 0.55 issues the predictions of confirmed
//!   patterns only: patio-core's analyzer gives 0.75 (growing towards 1) to a pattern
//!   it has just detected, 0.5 to a remembered one no request has confirmed yet, and
//!   halves the confidence after an unpredicted request; Markov chains carry their
//!   transition probabilities.
//! * **Counters** ([`Stats`]): hits, late hits, misses (a read with any byte from the
//!   backend; `partial_hits` of them had some bytes from the cache), accuracy (used /
//!   prefetched bytes), coverage (read bytes served from prefetches / read bytes),
//!   wasted bytes, backend requests and bytes, analyzer time — for the whole engine
//!   ([`Engine::stats`]) and for one stream ([`StreamReader::stats`]).
//! * **A stream that ends** (its reader is dropped or [`StreamReader::close`]d)
//!   takes its prefetches with it: ready ones are dropped as waste at once, queued
//!   ones are cancelled, and running ones are dropped as waste when they complete, so
//!   long-lived engines whose files come and go keep no orphaned bytes.

use crate::backend::DataFile;
use crate::cache::{Cache, CacheStats, FileId, Owner, Piece, Reserved};
use crate::policy::{Hint, Policy};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Tunables of the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Prefetch worker threads.
    pub workers: usize,
    /// Bytes the cache may hold (in flight and ready together).
    pub budget: u64,
    /// Requests ahead a new stream asks its policy for.
    pub initial_depth: usize,
    /// Most requests ahead.
    pub max_depth: usize,
    /// Hints with a lower confidence are not issued.
    pub min_confidence: f32,
    /// Largest single prefetch request; longer hints are split.
    pub max_request: u64,
}

impl Default for EngineConfig {
    /// 2 workers, 64 MiB, depth 4 (1 to 64), confidence 0.55, 1 MiB requests.
    fn default() -> Self {
        EngineConfig {
            workers: 2,
            budget: 64 << 20,
            initial_depth: 4,
            max_depth: 64,
            min_confidence: 0.55,
            max_request: 1 << 20,
        }
    }
}

/// Counters of an engine (all streams).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub requests: u64,
    pub hits: u64,
    pub late_hits: u64,
    pub misses: u64,
    /// Misses that had some of their bytes from the cache.
    pub partial_hits: u64,
    pub read_bytes: u64,
    /// Read bytes served from prefetched data.
    pub cache_bytes: u64,
    pub demand_requests: u64,
    pub demand_bytes: u64,
    /// Prefetches issued (reserved and queued).
    pub prefetch_requests: u64,
    pub prefetch_issued_bytes: u64,
    /// Prefetches cancelled before a worker started them (end of run).
    pub prefetch_cancelled: u64,
    pub prefetch_failed: u64,
    /// Bytes of completed prefetches.
    pub prefetched_bytes: u64,
    /// Prefetched bytes that reads used (each byte once).
    pub used_bytes: u64,
    /// Prefetched bytes evicted, expired or left unused.
    pub wasted_bytes: u64,
    /// Requests sent to the backend (demand reads and prefetches) and their bytes.
    pub backend_requests: u64,
    pub backend_bytes: u64,
    /// Prefetches a reader took over before they started.
    pub stolen: u64,
    /// Prefetches refused for lack of budget.
    pub refused: u64,
    pub evictions: u64,
    pub budget_bytes: u64,
    /// Bytes in the cache now (in flight and ready), and the most ever.
    pub resident_bytes: u64,
    pub peak_cache_bytes: u64,
    /// Total time spent in the policies' `observe`.
    pub analyzer_ns: u64,
}

impl Stats {
    /// Used prefetched bytes / prefetched bytes; `None` when nothing was prefetched.
    pub fn accuracy(&self) -> Option<f64> {
        (self.prefetched_bytes > 0).then(|| self.used_bytes as f64 / self.prefetched_bytes as f64)
    }

    /// Read bytes served from prefetches / read bytes.
    pub fn coverage(&self) -> f64 {
        if self.read_bytes == 0 {
            return 0.0;
        }
        self.cache_bytes as f64 / self.read_bytes as f64
    }

    pub fn analyzer_ns_per_request(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.analyzer_ns as f64 / self.requests as f64
    }
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    hits: AtomicU64,
    late_hits: AtomicU64,
    misses: AtomicU64,
    partial_hits: AtomicU64,
    read_bytes: AtomicU64,
    cache_bytes: AtomicU64,
    demand_requests: AtomicU64,
    demand_bytes: AtomicU64,
    prefetch_requests: AtomicU64,
    prefetch_issued_bytes: AtomicU64,
    prefetch_cancelled: AtomicU64,
    prefetch_failed: AtomicU64,
    prefetch_backend_requests: AtomicU64,
    prefetch_backend_bytes: AtomicU64,
    analyzer_ns: AtomicU64,
    /// Per stream only (the engine's come from the cache): prefetches taken over by
    /// the stream's reads, and hints refused for lack of budget.
    stolen: AtomicU64,
    refused: AtomicU64,
}

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

struct Job {
    file: Arc<DataFile>,
    reserved: Reserved,
    /// The issuing stream's counters and cache owner.
    stream: Arc<Counters>,
    owner: Arc<Owner>,
}

struct Shared {
    cache: Mutex<Cache>,
    counters: Counters,
    /// Set while [`Engine::quiesce`] runs: workers cancel queued jobs.
    cancel: AtomicBool,
    /// Jobs sent and not yet handled by a worker.
    pending: Mutex<u64>,
    idle: Condvar,
    sender: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Shared {
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().expect("cache poisoned")
    }

    fn job_done(&self) {
        let mut p = self.pending.lock().expect("pending poisoned");
        *p -= 1;
        if *p == 0 {
            self.idle.notify_all();
        }
    }
}

/// A file added to an engine.
#[derive(Clone)]
pub struct FileHandle {
    id: FileId,
    file: Arc<DataFile>,
}

impl FileHandle {
    pub fn file(&self) -> &Arc<DataFile> {
        &self.file
    }
}

/// The prefetch engine: the cache, the workers and the counters.
pub struct Engine {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    next_file: AtomicU64,
    config: EngineConfig,
}

impl Engine {
    /// Starts `config.workers` worker threads.
    pub fn new(config: EngineConfig) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared {
            cache: Mutex::new(Cache::new(config.budget)),
            counters: Counters::default(),
            cancel: AtomicBool::new(false),
            pending: Mutex::new(0),
            idle: Condvar::new(),
            sender: Mutex::new(Some(tx)),
        });
        let workers = (0..config.workers.max(1))
            .map(|i| {
                let (shared, rx) = (shared.clone(), rx.clone());
                std::thread::Builder::new()
                    .name(format!("patio-prefetch-{i}"))
                    .spawn(move || worker(&shared, &rx))
                    .expect("spawn prefetch worker")
            })
            .collect();
        Engine {
            shared,
            workers,
            next_file: AtomicU64::new(1),
            config,
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Makes a file known to the engine.
    pub fn add_file(&self, file: DataFile) -> FileHandle {
        FileHandle {
            id: self.next_file.fetch_add(1, Ordering::Relaxed),
            file: Arc::new(file),
        }
    }

    /// A reader for one stream of reads of `file`, predicted by `policy`.
    pub fn stream(&self, file: &FileHandle, policy: Box<dyn Policy>) -> StreamReader {
        StreamReader {
            shared: self.shared.clone(),
            config: self.config.clone(),
            file: file.clone(),
            policy,
            depth: self
                .config
                .initial_depth
                .clamp(1, self.config.max_depth.max(1)),
            owner: Arc::new(Owner::default()),
            local: Arc::new(Counters::default()),
            seen_waste: 0,
            last_cut: 0,
            issued: VecDeque::new(),
            reads: 0,
        }
    }

    /// Forgets cached bytes of `file` in `[offset, offset + len)` (they were
    /// overwritten).
    pub fn invalidate(&self, file: &FileHandle, offset: u64, len: u64) {
        self.shared.cache().invalidate(file.id, offset, len);
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let cs: CacheStats = self.shared.cache().stats();
        Stats {
            requests: get(&c.requests),
            hits: get(&c.hits),
            late_hits: get(&c.late_hits),
            misses: get(&c.misses),
            partial_hits: get(&c.partial_hits),
            read_bytes: get(&c.read_bytes),
            cache_bytes: get(&c.cache_bytes),
            demand_requests: get(&c.demand_requests),
            demand_bytes: get(&c.demand_bytes),
            prefetch_requests: get(&c.prefetch_requests),
            prefetch_issued_bytes: get(&c.prefetch_issued_bytes),
            prefetch_cancelled: get(&c.prefetch_cancelled),
            prefetch_failed: get(&c.prefetch_failed),
            prefetched_bytes: cs.prefetched,
            used_bytes: cs.used,
            wasted_bytes: cs.wasted,
            backend_requests: get(&c.demand_requests) + get(&c.prefetch_backend_requests),
            backend_bytes: get(&c.demand_bytes) + get(&c.prefetch_backend_bytes),
            stolen: cs.stolen,
            refused: cs.refused,
            evictions: cs.evictions,
            budget_bytes: cs.budget,
            resident_bytes: cs.resident,
            peak_cache_bytes: cs.peak,
            analyzer_ns: get(&c.analyzer_ns),
        }
    }

    /// Ends a run: prefetches not yet started are cancelled, those running complete,
    /// and every cached byte never used is counted as waste and dropped. The engine
    /// stays usable.
    pub fn quiesce(&self) -> Stats {
        self.shared.cancel.store(true, Ordering::SeqCst);
        {
            let mut p = self.shared.pending.lock().expect("pending poisoned");
            while *p > 0 {
                p = self.shared.idle.wait(p).expect("pending poisoned");
            }
        }
        self.shared.cache().drain();
        self.shared.cancel.store(false, Ordering::SeqCst);
        self.stats()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.cancel.store(true, Ordering::SeqCst);
        self.shared.sender.lock().expect("sender poisoned").take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn worker(shared: &Shared, rx: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let job = match rx.lock().expect("queue poisoned").recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        let r = &job.reserved;
        let (c, own) = (&shared.counters, &*job.stream);
        let both = |f: fn(&Counters) -> &AtomicU64, v: u64| {
            add(f(c), v);
            add(f(own), v);
        };
        if shared.cancel.load(Ordering::SeqCst) || job.owner.closed.load(Ordering::Relaxed) {
            if r.slot.start() {
                r.slot
                    .finish(Err(Arc::new(io::Error::other("prefetch cancelled"))));
                shared.cache().complete(r.file, r.offset, r.id, None);
                both(|c| &c.prefetch_cancelled, 1);
            }
        } else if r.slot.start() {
            let result = job.file.read(r.offset, r.len);
            both(|c| &c.prefetch_backend_requests, 1);
            match result {
                Ok(bytes) if bytes.len() as u64 == r.len => {
                    both(|c| &c.prefetch_backend_bytes, r.len);
                    let data: Arc<[u8]> = bytes.into();
                    r.slot.finish(Ok(data.clone()));
                    shared.cache().complete(r.file, r.offset, r.id, Some(data));
                }
                other => {
                    let e = match other {
                        Err(e) => e,
                        Ok(_) => io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank"),
                    };
                    both(|c| &c.prefetch_failed, 1);
                    r.slot.finish(Err(Arc::new(e)));
                    shared.cache().complete(r.file, r.offset, r.id, None);
                }
            }
        }
        shared.job_done();
    }
}

/// A prefetch issued by a stream, remembered until it is used or expires.
struct Issued {
    offset: u64,
    id: u64,
    /// The stream's read count when it was issued, and how many reads it may wait.
    at_read: u64,
    horizon: u64,
}

/// One stream of reads of one file, with its policy.
pub struct StreamReader {
    shared: Arc<Shared>,
    config: EngineConfig,
    file: FileHandle,
    policy: Box<dyn Policy>,
    depth: usize,
    owner: Arc<Owner>,
    /// This stream's share of the engine's counters.
    local: Arc<Counters>,
    seen_waste: u64,
    /// Read count at the last depth cut.
    last_cut: u64,
    issued: VecDeque<Issued>,
    reads: u64,
}

impl StreamReader {
    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// Requests ahead the stream currently prefetches.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Reads up to `buf.len()` bytes at `offset` (fewer at the end of the file) and
    /// returns how many were read; prefetches what the policy predicts next.
    pub fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let size = self.file.file.size();
        let n = (buf.len() as u64).min(size.saturating_sub(offset));
        let start = Instant::now();
        let hints = self.policy.observe(offset, buf.len() as u64, self.depth);
        self.count(|c| &c.analyzer_ns, start.elapsed().as_nanos() as u64);
        self.reads += 1;
        self.react_to_waste();
        self.expire();

        let pieces = if n > 0 {
            self.shared.cache().take(self.file.id, offset, n)
        } else {
            Vec::new()
        };
        self.issue(&hints, offset, n);

        let (mut late, mut missed, mut from_cache, mut at) = (false, false, 0u64, 0usize);
        for piece in pieces {
            let len = piece.len() as usize;
            let out = &mut buf[at..at + len];
            match piece {
                Piece::Ready { data, at: from, .. } => {
                    out.copy_from_slice(&data[from..from + len]);
                    from_cache += len as u64;
                }
                Piece::Filling { slot, at: from, .. } => {
                    late = true;
                    match slot.wait() {
                        Ok(data) => {
                            out.copy_from_slice(&data[from..from + len]);
                            from_cache += len as u64;
                        }
                        Err(_) => {
                            missed = true;
                            self.demand(offset + at as u64, out)?;
                        }
                    }
                }
                Piece::Missing {
                    offset: o, stolen, ..
                } => {
                    late |= stolen;
                    if stolen {
                        self.count(|c| &c.stolen, 1);
                    }
                    missed = true;
                    self.demand(o, out)?;
                }
            }
            at += len;
        }

        self.count(|c| &c.requests, 1);
        self.count(|c| &c.read_bytes, n);
        self.count(|c| &c.cache_bytes, from_cache);
        if missed {
            self.count(|c| &c.misses, 1);
            if from_cache > 0 {
                self.count(|c| &c.partial_hits, 1);
            }
        } else if late {
            self.count(|c| &c.late_hits, 1);
        } else {
            self.count(|c| &c.hits, 1);
        }
        if late {
            self.depth = (self.depth + 1).min(self.config.max_depth.max(1));
        }
        Ok(n as usize)
    }

    /// Reads `out.len()` bytes at `offset` from the backend for the application.
    fn demand(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let data = self.file.file.read(offset, out.len() as u64)?;
        if data.len() != out.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: short read at {offset} (file changed size?)",
                    self.file.file.path().display()
                ),
            ));
        }
        out.copy_from_slice(&data);
        self.count(|c| &c.demand_requests, 1);
        self.count(|c| &c.demand_bytes, data.len() as u64);
        Ok(())
    }

    /// Adds `v` to one counter of the engine and of this stream.
    fn count(&self, f: fn(&Counters) -> &AtomicU64, v: u64) {
        add(f(&self.shared.counters), v);
        add(f(&self.local), v);
    }

    /// This stream's counters: its reads, its prefetches and their use. The cache's
    /// `budget_bytes`, `resident_bytes`, `peak_cache_bytes` and `evictions` are the
    /// engine's (one budget for all streams). Bytes of prefetches still in flight are
    /// not yet counted as prefetched.
    pub fn stats(&self) -> Stats {
        let c = &*self.local;
        let o = &*self.owner;
        let cs: CacheStats = self.shared.cache().stats();
        let prefetch_backend_requests = get(&c.prefetch_backend_requests);
        let prefetch_backend_bytes = get(&c.prefetch_backend_bytes);
        Stats {
            requests: get(&c.requests),
            hits: get(&c.hits),
            late_hits: get(&c.late_hits),
            misses: get(&c.misses),
            partial_hits: get(&c.partial_hits),
            read_bytes: get(&c.read_bytes),
            cache_bytes: get(&c.cache_bytes),
            demand_requests: get(&c.demand_requests),
            demand_bytes: get(&c.demand_bytes),
            prefetch_requests: get(&c.prefetch_requests),
            prefetch_issued_bytes: get(&c.prefetch_issued_bytes),
            prefetch_cancelled: get(&c.prefetch_cancelled),
            prefetch_failed: get(&c.prefetch_failed),
            prefetched_bytes: o.prefetched_bytes.load(Ordering::Relaxed),
            used_bytes: o.used_bytes.load(Ordering::Relaxed),
            wasted_bytes: o.wasted_bytes.load(Ordering::Relaxed),
            backend_requests: get(&c.demand_requests) + prefetch_backend_requests,
            backend_bytes: get(&c.demand_bytes) + prefetch_backend_bytes,
            stolen: get(&c.stolen),
            refused: get(&c.refused),
            evictions: cs.evictions,
            budget_bytes: cs.budget,
            resident_bytes: cs.resident,
            peak_cache_bytes: cs.peak,
            analyzer_ns: get(&c.analyzer_ns),
        }
    }

    /// Ends the stream (as dropping it does) and returns its final counters: its
    /// ready prefetches that no read used are counted as waste and dropped, queued
    /// ones are cancelled, and those still running are dropped when they complete
    /// (their bytes are not in the returned counters).
    pub fn close(mut self) -> Stats {
        self.release();
        self.stats()
    }

    /// Ends the stream's prefetches (see [`StreamReader::close`]).
    fn release(&mut self) {
        self.owner.closed.store(true, Ordering::Relaxed);
        let mut cache = self.shared.cache();
        for i in self.issued.drain(..) {
            cache.release(self.file.id, i.offset, i.id);
        }
    }

    /// Halves the depth when some of this stream's prefetched bytes were wasted
    /// since the last read — at most once per `depth` reads, so that the several
    /// prefetches lost to one change of pattern count once.
    fn react_to_waste(&mut self) {
        let wasted = self.owner.wasted_events.load(Ordering::Relaxed);
        if wasted > self.seen_waste {
            self.seen_waste = wasted;
            if self.reads >= self.last_cut + self.depth as u64 {
                self.depth = (self.depth / 2).max(1);
                self.last_cut = self.reads;
            }
        }
    }

    /// Drops this stream's prefetches that stayed unused past their horizon.
    fn expire(&mut self) {
        while let Some(front) = self.issued.front() {
            if self.reads - front.at_read <= front.horizon {
                break;
            }
            let mut cache = self.shared.cache();
            if cache.is_filling(self.file.id, front.offset, front.id) {
                break;
            }
            cache.expire_if_unused(self.file.id, front.offset, front.id);
            drop(cache);
            self.issued.pop_front();
        }
        // Waste found by the expiry lowers the depth at once.
        self.react_to_waste();
    }

    /// Reserves and queues the hinted ranges not yet cached, nearest first, skipping
    /// the bytes of the read in progress (`[offset, offset + n)`).
    fn issue(&mut self, hints: &[Hint], offset: u64, n: u64) {
        let size = self.file.file.size();
        let shared = self.shared.clone();
        let mut jobs = Vec::new();
        {
            let mut cache = shared.cache();
            'hints: for h in hints {
                if h.confidence < self.config.min_confidence {
                    continue;
                }
                let lo = h.offset.min(size);
                let hi = h.offset.saturating_add(h.len).min(size);
                for (lo, hi) in minus(lo, hi, offset, offset + n) {
                    for (g, glen) in cache.gaps(self.file.id, lo, hi - lo) {
                        let mut at = g;
                        while at < g + glen {
                            let len = (g + glen - at).min(self.config.max_request.max(1));
                            let Some(r) =
                                cache.reserve(self.file.id, at, len, Some(self.owner.clone()))
                            else {
                                self.count(|c| &c.refused, 1);
                                break 'hints;
                            };
                            self.issued.push_back(Issued {
                                offset: at,
                                id: r.id,
                                at_read: self.reads,
                                horizon: 2 * (self.depth as u64).max(h.reads as u64) + 4,
                            });
                            jobs.push(Job {
                                file: self.file.file.clone(),
                                reserved: r,
                                stream: self.local.clone(),
                                owner: self.owner.clone(),
                            });
                            at += len;
                        }
                    }
                }
            }
        }
        if jobs.is_empty() {
            return;
        }
        let sender = self.shared.sender.lock().expect("sender poisoned").clone();
        let mut cache_rollback = Vec::new();
        for job in jobs {
            self.count(|c| &c.prefetch_requests, 1);
            self.count(|c| &c.prefetch_issued_bytes, job.reserved.len);
            *self.shared.pending.lock().expect("pending poisoned") += 1;
            let sent = match &sender {
                Some(tx) => tx.send(job).map_err(|e| e.0),
                None => Err(job),
            };
            if let Err(job) = sent {
                // The engine is shutting down: give the reservation back.
                self.shared.job_done();
                cache_rollback.push(job.reserved);
            }
        }
        if !cache_rollback.is_empty() {
            let mut cache = self.shared.cache();
            for r in cache_rollback {
                r.slot
                    .finish(Err(Arc::new(io::Error::other("engine stopped"))));
                cache.complete(r.file, r.offset, r.id, None);
            }
        }
    }
}

impl Drop for StreamReader {
    /// Prefetches of a stream that ends are of no use to anyone: they go.
    fn drop(&mut self) {
        self.release();
    }
}

/// `[lo, hi)` without `[a, b)`: zero, one or two non-empty ranges.
fn minus(lo: u64, hi: u64, a: u64, b: u64) -> Vec<(u64, u64)> {
    if b <= lo || a >= hi || a == b {
        return if lo < hi { vec![(lo, hi)] } else { Vec::new() };
    }
    let mut out = Vec::new();
    if lo < a {
        out.push((lo, a));
    }
    if b < hi {
        out.push((b, hi));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_difference() {
        assert_eq!(minus(0, 10, 3, 5), [(0, 3), (5, 10)]);
        assert_eq!(minus(0, 10, 0, 10), []);
        assert_eq!(minus(0, 10, 10, 20), [(0, 10)]);
        assert_eq!(minus(5, 10, 0, 7), [(7, 10)]);
        assert_eq!(minus(5, 5, 0, 1), []);
        assert_eq!(minus(0, 10, 4, 4), [(0, 10)]);
    }
}
