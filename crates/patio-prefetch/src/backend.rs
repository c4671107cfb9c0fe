//! The slow store behind the cache: each backend request costs
//! `latency + bytes / bandwidth` (with seeded jitter, ±10 % by default), served by at
//! most `concurrency` requests at a time, while the bytes come from the real file.
//!
//! The local disk here is far faster than a busy parallel file system, so the model
//! puts the latency back (docs: /work/shared/design/BENCHMARKING.md). A request holds
//! one of the store's permits for its whole modelled cost and *sleeps* for whatever
//! part of that cost the real read did not take: nothing spins, so the two cores stay
//! free for the application and the prefetch workers.
//!
//! Given a [`Striping`] ([`StoreConfig::striping`]), the store is the striped device
//! model of [`crate::striped`] instead: a read is split into that model's RPCs, each
//! target is a FIFO server with a "busy until" clock and a head position, every RPC
//! costs [`Striping::rpc_cost`] (the simulator's one cost definition) from the moment
//! its target is free, and the read sleeps until its last RPC completes plus the
//! request latency. The permits and the flat latency are not used then; the targets
//! are the servers. Every file gets its own region of the modelled address space
//! ([`Striping::file_base`], numbered by name in the order the store first sees them),
//! so offset `o` of two files is not one head position.
//!
//! The file is opened with `O_DIRECT` (reads through an aligned bounce buffer) so the
//! backing file system adds no readahead or caching of its own. Where the file system
//! refuses `O_DIRECT`, reads are buffered with `POSIX_FADV_RANDOM` (no kernel
//! readahead) and every range read is dropped again with `POSIX_FADV_DONTNEED`;
//! [`DataFile::io_mode`] says which one is in use.

use crate::rng::Rng;
use crate::striped::{Striping, StripingError};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Alignment of `O_DIRECT` offsets, lengths and buffers (covers 512-byte and 4 KiB
/// logical blocks).
pub const DIRECT_ALIGN: usize = 4096;

/// Parameters of the slow-store model.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Fixed cost of every request.
    pub latency: Duration,
    /// Bytes per second; `f64::INFINITY` for no transfer cost.
    pub bandwidth: f64,
    /// Requests served at the same time (a semaphore).
    pub concurrency: usize,
    /// Each request's cost is scaled by a factor drawn uniformly from
    /// `1 ± jitter`.
    pub jitter: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// Serve reads as the striped device model instead (its own latencies, bandwidth,
    /// jitter and seed; `latency`, `bandwidth`, `concurrency`, `jitter` and `seed`
    /// above are then unused).
    pub striping: Option<Striping>,
}

impl Default for StoreConfig {
    /// 2 ms, 200 MB/s, 4 concurrent requests, ±10 % jitter.
    fn default() -> Self {
        StoreConfig {
            latency: Duration::from_millis(2),
            bandwidth: 200e6,
            concurrency: 4,
            jitter: 0.1,
            seed: 0x5107_5702_e000_0001,
            striping: None,
        }
    }
}

impl StoreConfig {
    /// No modelled cost: the real file only (still bounded concurrency).
    pub fn instant() -> Self {
        StoreConfig {
            latency: Duration::ZERO,
            bandwidth: f64::INFINITY,
            jitter: 0.0,
            ..StoreConfig::default()
        }
    }

    /// `latency` in milliseconds and `bandwidth` in MB/s (10^6 bytes), the rest default.
    pub fn with(latency_ms: f64, bandwidth_mbps: f64) -> Self {
        StoreConfig {
            latency: Duration::from_secs_f64(latency_ms.max(0.0) / 1e3),
            bandwidth: if bandwidth_mbps > 0.0 {
                bandwidth_mbps * 1e6
            } else {
                f64::INFINITY
            },
            ..StoreConfig::default()
        }
    }

    /// A store served by the striped device model `striping`.
    pub fn striped(striping: Striping) -> Self {
        StoreConfig {
            striping: Some(striping),
            ..StoreConfig::default()
        }
    }

    /// The modelled cost of one request of `bytes` bytes, without jitter (of the flat
    /// model: a striped store's cost depends on what was read before).
    pub fn cost(&self, bytes: u64) -> Duration {
        let transfer = if self.bandwidth.is_finite() && self.bandwidth > 0.0 {
            bytes as f64 / self.bandwidth
        } else {
            0.0
        };
        self.latency + Duration::from_secs_f64(transfer)
    }
}

/// A counting semaphore (a mutex and a condition variable).
struct Semaphore {
    free: Mutex<usize>,
    cv: Condvar,
}

struct Permit<'a>(&'a Semaphore);

impl Semaphore {
    fn new(n: usize) -> Self {
        Semaphore {
            free: Mutex::new(n.max(1)),
            cv: Condvar::new(),
        }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().expect("semaphore poisoned");
        while *free == 0 {
            free = self.cv.wait(free).expect("semaphore poisoned");
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().expect("semaphore poisoned") += 1;
        self.0.cv.notify_one();
    }
}

/// One target of a striped store: when it is free again and where its head is.
struct TargetClock {
    free_at: Instant,
    head: u64,
}

/// The store model shared by every file read through it: permits (or the targets of
/// a striping), jitter and counters.
pub struct SlowStore {
    config: StoreConfig,
    permits: Semaphore,
    jitter: Mutex<Rng>,
    targets: Vec<Mutex<TargetClock>>,
    /// Each file's number, by name, in the order first seen ([`SlowStore::file_base`]).
    files: Mutex<HashMap<PathBuf, u64>>,
    requests: AtomicU64,
    bytes: AtomicU64,
    rpcs: AtomicU64,
    rpc_bytes: AtomicU64,
}

impl SlowStore {
    /// A store of `config`. Panics if its striping is invalid
    /// ([`SlowStore::try_new`] returns the error instead).
    pub fn new(config: StoreConfig) -> Arc<Self> {
        Self::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A store of `config`, or why its striping is invalid.
    pub fn try_new(config: StoreConfig) -> Result<Arc<Self>, StripingError> {
        let (seed, targets) = match &config.striping {
            Some(s) => {
                s.validate()?;
                (s.seed, s.targets)
            }
            None => (config.seed, 0),
        };
        let now = Instant::now();
        Ok(Arc::new(SlowStore {
            permits: Semaphore::new(config.concurrency),
            jitter: Mutex::new(Rng::new(seed)),
            targets: (0..targets)
                .map(|_| {
                    Mutex::new(TargetClock {
                        free_at: now,
                        head: 0,
                    })
                })
                .collect(),
            config,
            files: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            rpcs: AtomicU64::new(0),
            rpc_bytes: AtomicU64::new(0),
        }))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Backend requests served so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Bytes returned by backend requests so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// RPCs served by the targets of a striped store so far (0 without a striping).
    pub fn rpcs(&self) -> u64 {
        self.rpcs.load(Ordering::Relaxed)
    }

    /// Bytes those RPCs transferred, after page or whole-RPC rounding.
    pub fn rpc_bytes(&self) -> u64 {
        self.rpc_bytes.load(Ordering::Relaxed)
    }

    /// Where the file called `name` starts in the modelled address space: the
    /// [`Striping::file_base`] of its number (files are numbered in the order the
    /// store first sees them; the same name keeps its number); 0 without a striping.
    pub fn file_base(&self, name: &Path) -> u64 {
        let Some(striping) = &self.config.striping else {
            return 0;
        };
        let mut files = self.files.lock().expect("files poisoned");
        let next = files.len() as u64;
        striping.file_base(*files.entry(name.to_path_buf()).or_insert(next))
    }

    /// The cost of the next request of `bytes` bytes, jitter drawn.
    fn draw_cost(&self, bytes: u64) -> Duration {
        let base = self.config.cost(bytes);
        if self.config.jitter <= 0.0 || base.is_zero() {
            return base;
        }
        let u = self.jitter.lock().expect("jitter poisoned").unit();
        base.mul_f64((1.0 + self.config.jitter * (2.0 * u - 1.0)).max(0.0))
    }

    /// Charges a write of `bytes` bytes at modelled address `offset` (a file's
    /// [`SlowStore::file_base`] plus the offset in it; [`DataFile::pace_write`] adds
    /// it), already made to the file, to the striped model (one request priced like a
    /// read of those bytes, on the same target clocks) and sleeps until it completes;
    /// the flat model does not price writes. Mounts behind the striped model call it
    /// for every write they pass on.
    pub fn pace_write(&self, offset: u64, bytes: u64) {
        if let Some(striping) = &self.config.striping {
            let _ = self.serve_striped(striping, offset, bytes, || Ok(()));
        }
    }

    /// Runs `read`, the read of `bytes` bytes at `offset`, as one backend request of
    /// the striped model if there is one, of the flat model otherwise.
    fn serve_at<T>(
        &self,
        offset: u64,
        bytes: u64,
        read: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        match &self.config.striping {
            Some(striping) => self.serve_striped(striping, offset, bytes, read),
            None => self.serve(bytes, read),
        }
    }

    /// Runs `read` as one request of the striped model: books its RPCs on their
    /// targets' clocks (FIFO from the issue time, seek distance from each target's
    /// head), then sleeps until the last one completes plus the request latency.
    fn serve_striped<T>(
        &self,
        striping: &Striping,
        offset: u64,
        bytes: u64,
        read: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        let issued = Instant::now();
        let rpcs = if bytes == 0 {
            Vec::new()
        } else {
            striping.request_rpcs(&[(offset, bytes)])
        };
        let mut done = issued;
        for rpc in &rpcs {
            let mut target = self.targets[rpc.target].lock().expect("target poisoned");
            let distance = rpc.object_offset.abs_diff(target.head);
            let cost = {
                let mut rng = self.jitter.lock().expect("jitter poisoned");
                striping.rpc_cost(distance, rpc.len, &mut rng)
            };
            target.free_at = target.free_at.max(issued) + seconds(cost);
            target.head = rpc.end();
            done = done.max(target.free_at);
            self.rpc_bytes.fetch_add(rpc.len, Ordering::Relaxed);
        }
        let done = done + seconds(striping.request_latency);
        let out = read();
        let left = done.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.rpcs.fetch_add(rpcs.len() as u64, Ordering::Relaxed);
        if out.is_ok() {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        out
    }

    /// Runs `read` as one backend request: holds a permit for the modelled cost of
    /// `bytes` bytes and sleeps for whatever part of it `read` did not take.
    fn serve<T>(&self, bytes: u64, read: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let _permit = self.permits.acquire();
        let start = Instant::now();
        let cost = self.draw_cost(bytes);
        let out = read();
        let left = cost.saturating_sub(start.elapsed());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        if out.is_ok() {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        out
    }
}

/// How a [`DataFile`] reads its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// `O_DIRECT`: no page cache, no readahead by the backing file system.
    Direct,
    /// Buffered reads with `POSIX_FADV_RANDOM` and `POSIX_FADV_DONTNEED`, because the
    /// file system refused `O_DIRECT` (the reason is kept).
    Buffered { reason: String },
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoMode::Direct => write!(f, "O_DIRECT"),
            IoMode::Buffered { reason } => write!(
                f,
                "buffered with POSIX_FADV_DONTNEED (O_DIRECT not supported: {reason})"
            ),
        }
    }
}

/// One data file read through a [`SlowStore`]. Its size is the one it had at open,
/// until a front end that changes the file says otherwise ([`DataFile::set_size`]).
pub struct DataFile {
    file: File,
    path: PathBuf,
    size: AtomicU64,
    mode: IoMode,
    store: Arc<SlowStore>,
    /// Where the file starts in the store's modelled address space.
    base: u64,
}

impl DataFile {
    /// Opens `path` for reading through `store`, with `O_DIRECT` when the file system
    /// supports it.
    pub fn open(path: &Path, store: Arc<SlowStore>) -> io::Result<Self> {
        Self::open_named(path, path, store)
    }

    /// Opens `path` like [`DataFile::open`] but calls it `name` (in messages and
    /// [`DataFile::path`]): for a `/proc/self/fd/N` link that reopens a descriptor the
    /// caller holds, so that a file renamed or unlinked since it was opened is still
    /// the one read.
    pub fn open_named(path: &Path, name: &Path, store: Arc<SlowStore>) -> io::Result<Self> {
        let size = std::fs::metadata(path)?.len();
        let direct = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let refused = |e: &io::Error| e.raw_os_error() == Some(libc::EINVAL);
        let (file, mode) = match direct {
            Ok(file) => match probe_direct(&file, size) {
                Ok(()) => (file, IoMode::Direct),
                Err(e) if refused(&e) => (buffered(path)?, buffered_mode(e)),
                Err(e) => return Err(e),
            },
            Err(e) if refused(&e) => (buffered(path)?, buffered_mode(e)),
            Err(e) => return Err(e),
        };
        Ok(DataFile {
            file,
            path: name.to_path_buf(),
            size: AtomicU64::new(size),
            mode,
            base: store.file_base(name),
            store,
        })
    }

    /// The file's size as far as reads are concerned: nothing at or past it is read.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// The file now has `size` bytes (it was written or truncated by the caller).
    pub fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn io_mode(&self) -> &IoMode {
        &self.mode
    }

    pub fn store(&self) -> &Arc<SlowStore> {
        &self.store
    }

    /// Where the file starts in the store's modelled address space.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Charges a write of `bytes` bytes at `offset` of this file to the store
    /// ([`SlowStore::pace_write`] at the file's modelled address).
    pub fn pace_write(&self, offset: u64, bytes: u64) {
        self.store
            .pace_write(self.base.saturating_add(offset), bytes);
    }

    /// One backend request: the bytes of `[offset, offset + len)` that lie inside the
    /// file (fewer at its end, none past it), at the store's cost.
    pub fn read(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let end = offset.saturating_add(len).min(self.size());
        let want = end.saturating_sub(offset);
        self.store
            .serve_at(self.base.saturating_add(offset), want, || {
                if want == 0 {
                    return Ok(Vec::new());
                }
                match self.mode {
                    IoMode::Direct => read_direct(&self.file, offset, want),
                    IoMode::Buffered { .. } => read_buffered(&self.file, offset, want),
                }
            })
    }
}

/// `x` seconds as a duration (0 for anything negative or not a number).
fn seconds(x: f64) -> Duration {
    Duration::try_from_secs_f64(x).unwrap_or(Duration::ZERO)
}

fn buffered(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    // Advice only: a failure changes performance, never the bytes.
    // SAFETY: plain syscalls on a descriptor we own.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
    Ok(file)
}

fn buffered_mode(e: io::Error) -> IoMode {
    IoMode::Buffered {
        reason: e.to_string(),
    }
}

/// Reads one aligned block to find out whether `O_DIRECT` reads work here (some file
/// systems accept the flag at open and refuse the reads).
fn probe_direct(file: &File, size: u64) -> io::Result<()> {
    if size == 0 {
        return Ok(());
    }
    let mut buf = AlignedBuf::new(DIRECT_ALIGN);
    file.read_at(buf.as_mut_slice(), 0).map(|_| ())
}

fn read_buffered(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len as usize];
    let n = read_full(file, &mut out, offset)?;
    out.truncate(n);
    // SAFETY: advice on a descriptor we own.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
    Ok(out)
}

fn read_direct(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let a = DIRECT_ALIGN as u64;
    let start = offset / a * a;
    let end = (offset + len).div_ceil(a) * a;
    let mut buf = AlignedBuf::new((end - start) as usize);
    let n = read_full_direct(file, buf.as_mut_slice(), start)?;
    let skip = (offset - start) as usize;
    let got = n.saturating_sub(skip).min(len as usize);
    Ok(buf.as_mut_slice()[skip..skip + got].to_vec())
}

/// [`read_full`] for an `O_DIRECT` descriptor (`buf` and `offset` aligned): a read
/// that returns part of a block ended at the end of the file, and the loop stops
/// there — reading on from that unaligned offset would fail with `EINVAL` when a
/// write extended the file meanwhile (the bytes past the old end belong to the next
/// request, which sees the new size).
fn read_full_direct(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                if done % DIRECT_ALIGN != 0 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `pread` until `buf` is full or the file ends; returns the bytes read.
pub fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A zeroed heap buffer aligned for `O_DIRECT` (at least [`DIRECT_ALIGN`] bytes).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least [`DIRECT_ALIGN`]), aligned to
    /// [`DIRECT_ALIGN`].
    pub fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(DIRECT_ALIGN), DIRECT_ALIGN)
            .expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` owns `layout.size()` initialised bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` owns `layout.size()` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn data_file(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        f.flush().unwrap();
        (f, bytes)
    }

    #[test]
    fn reads_exact_bytes_at_any_alignment() {
        let (f, bytes) = data_file(50_000);
        let file = DataFile::open(f.path(), SlowStore::new(StoreConfig::instant())).unwrap();
        for &(off, len) in &[
            (0u64, 1u64),
            (1, 4095),
            (4095, 2),
            (4096, 4096),
            (12_345, 20_000),
            (49_990, 100),
            (50_000, 10),
            (60_000, 10),
        ] {
            let got = file.read(off, len).unwrap();
            let lo = (off as usize).min(bytes.len());
            let hi = ((off + len) as usize).min(bytes.len());
            assert_eq!(got, &bytes[lo..hi], "{off}+{len}");
        }
        assert_eq!(file.store().requests(), 8);
    }

    #[test]
    fn a_request_costs_at_least_latency_plus_transfer() {
        let (f, _) = data_file(1 << 20);
        let config = StoreConfig {
            latency: Duration::from_millis(3),
            bandwidth: 100e6,
            jitter: 0.0,
            ..StoreConfig::default()
        };
        let file = DataFile::open(f.path(), SlowStore::new(config.clone())).unwrap();
        let bytes = 500_000u64;
        let want = config.cost(bytes);
        assert_eq!(want, Duration::from_millis(8));
        let start = Instant::now();
        file.read(0, bytes).unwrap();
        assert!(start.elapsed() >= want, "{:?} < {want:?}", start.elapsed());
        // With jitter the cost stays within ±10 % of the model: at least 0.9 of it.
        let jittery =
            DataFile::open(f.path(), SlowStore::new(StoreConfig::with(2.0, 50.0))).unwrap();
        for _ in 0..3 {
            let start = Instant::now();
            jittery.read(4096, 100_000).unwrap();
            let floor = StoreConfig::with(2.0, 50.0).cost(100_000).mul_f64(0.9);
            assert!(start.elapsed() >= floor);
        }
    }

    #[test]
    fn concurrency_is_bounded() {
        let (f, _) = data_file(1 << 16);
        let config = StoreConfig {
            latency: Duration::from_millis(2),
            concurrency: 2,
            jitter: 0.0,
            bandwidth: f64::INFINITY,
            ..StoreConfig::default()
        };
        let file = Arc::new(DataFile::open(f.path(), SlowStore::new(config)).unwrap());
        let start = Instant::now();
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let file = file.clone();
                std::thread::spawn(move || file.read(i * 100, 100).unwrap())
            })
            .collect();
        threads.into_iter().for_each(|t| {
            t.join().unwrap();
        });
        // Six 2 ms requests two at a time: three rounds at least.
        assert!(start.elapsed() >= Duration::from_millis(6));
        assert_eq!(file.store().requests(), 6);
        assert_eq!(file.store().bytes(), 600);
    }

    #[test]
    fn a_reopened_descriptor_follows_size_changes_it_is_told_about() {
        let (mut f, mut bytes) = data_file(10_000);
        let link = PathBuf::from(format!("/proc/self/fd/{}", f.as_file().as_raw_fd()));
        let store = SlowStore::new(StoreConfig::instant());
        let file = DataFile::open_named(&link, Path::new("shown.bin"), store).unwrap();
        assert_eq!((file.size(), file.path()), (10_000, Path::new("shown.bin")));
        let more: Vec<u8> = (0..5000).map(|i| (i % 13) as u8).collect();
        f.write_all(&more).unwrap();
        f.flush().unwrap();
        bytes.extend_from_slice(&more);
        assert_eq!(file.read(9_000, 3_000).unwrap(), &bytes[9_000..10_000]);
        file.set_size(15_000);
        assert_eq!(file.read(9_000, 3_000).unwrap(), &bytes[9_000..12_000]);
        file.set_size(100);
        assert_eq!(file.read(50, 100).unwrap(), &bytes[50..100]);
    }

    /// 1 target, 64 KiB stripes and RPCs, `L` 0.5/1/2/4 ms, 655.36 MB/s (a full RPC
    /// transfers in 0.1 ms).
    fn striping() -> Striping {
        Striping {
            targets: 1,
            stripe_size: 65536,
            rpc_size: 65536,
            latency_seq: 0.5e-3,
            latency_near: 1e-3,
            latency_mid: 2e-3,
            latency_far: 4e-3,
            bandwidth: 655.36e6,
            request_latency: 0.25e-3,
            ..Striping::default()
        }
    }

    #[test]
    fn striped_reads_are_exact_and_take_the_modelled_time() {
        let (f, bytes) = data_file(1_000_000);
        let s = striping();
        let file =
            DataFile::open(f.path(), SlowStore::new(StoreConfig::striped(s.clone()))).unwrap();
        let reads = [
            (0u64, 100_000u64),
            (100_000, 10),
            (900_000, 50_000),
            (7, 3),
            (999_990, 100),
        ];
        // The simulator's time for the same requests from one client.
        let wanted: Vec<Vec<(u64, u64)>> = reads
            .iter()
            .map(|&(o, l)| vec![(o, l.min(1_000_000 - o))])
            .collect();
        let model = s.simulate(&[wanted]).unwrap();
        let start = Instant::now();
        for &(off, len) in &reads {
            let got = file.read(off, len).unwrap();
            let hi = ((off + len) as usize).min(bytes.len());
            assert_eq!(got, &bytes[off as usize..hi], "{off}+{len}");
        }
        let took = start.elapsed();
        assert!(
            took.as_secs_f64() >= model.seconds - 1e-6,
            "{took:?} < {}",
            model.seconds
        );
        let store = file.store();
        assert_eq!((store.requests(), store.rpcs()), (5, model.rpcs));
        assert_eq!(store.rpc_bytes(), model.bytes);
        assert_eq!(store.bytes(), 100_000 + 10 + 50_000 + 3 + 10);
        assert!(model.seeks.far >= 1 && model.seeks.seq >= 1, "{model:?}");
    }

    #[test]
    fn every_file_has_its_own_modelled_address_range() {
        let (a, _) = data_file(1 << 16);
        let (b, _) = data_file(1 << 16);
        // Seeks within an RPC are free, seeks beyond 10 RPCs cost 20 ms.
        let s = Striping {
            latency_seq: 0.0,
            latency_near: 0.0,
            latency_mid: 0.0,
            latency_far: 20e-3,
            bandwidth: f64::INFINITY,
            request_latency: 0.0,
            ..striping()
        };
        let store = SlowStore::new(StoreConfig::striped(s.clone()));
        let fa = DataFile::open(a.path(), store.clone()).unwrap();
        let fb = DataFile::open(b.path(), store.clone()).unwrap();
        assert_eq!((fa.base(), fb.base()), (s.file_base(0), s.file_base(1)));
        assert_ne!(fa.base(), fb.base());
        // The same name keeps its range.
        assert_eq!(store.file_base(a.path()), fa.base());
        let again = DataFile::open(b.path(), store.clone()).unwrap();
        assert_eq!(again.base(), fb.base());
        // The k-th reads of two files are a far seek apart, not the same position.
        let start = Instant::now();
        fa.read(0, 4096).unwrap();
        fb.read(0, 4096).unwrap();
        fa.read(4096, 4096).unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(40),
            "{:?}",
            start.elapsed()
        );
        // Flat stores have no address space.
        let flat = SlowStore::new(StoreConfig::instant());
        assert_eq!(DataFile::open(b.path(), flat).unwrap().base(), 0);
    }

    #[test]
    fn a_striped_target_serves_one_rpc_at_a_time() {
        let (f, _) = data_file(1 << 20);
        let s = Striping {
            latency_seq: 5e-3,
            latency_near: 5e-3,
            latency_mid: 5e-3,
            latency_far: 5e-3,
            bandwidth: f64::INFINITY,
            request_latency: 0.0,
            ..striping()
        };
        let store = SlowStore::new(StoreConfig::striped(s));
        let file = Arc::new(DataFile::open(f.path(), store).unwrap());
        let start = Instant::now();
        let threads: Vec<_> = (0..4u64)
            .map(|i| {
                let file = file.clone();
                std::thread::spawn(move || file.read(i * 200_000, 4096).unwrap())
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap().len(), 4096);
        }
        // Four 5 ms RPCs on one target, queued.
        assert!(
            start.elapsed() >= Duration::from_millis(20),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(file.store().rpcs(), 4);
    }

    #[test]
    fn an_invalid_striping_is_refused() {
        let bad = Striping {
            targets: 0,
            ..Striping::default()
        };
        assert!(SlowStore::try_new(StoreConfig::striped(bad)).is_err());
        assert_eq!(SlowStore::new(StoreConfig::default()).rpcs(), 0);
    }

    #[test]
    fn io_mode_is_reported() {
        let (f, _) = data_file(100);
        let file = DataFile::open(f.path(), SlowStore::new(StoreConfig::instant())).unwrap();
        // Either mode is acceptable; the description must name it.
        let text = file.io_mode().to_string();
        assert!(text.contains("O_DIRECT"), "{text}");
    }
}
