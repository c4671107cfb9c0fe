//! The prefetch mount (`patio mount prefetch`): a passthrough mount whose reads are
//! served by patio-prefetch's engine, so that the prediction policies run on the
//! requests real programs make.
//!
//! * **One engine per mount**: one cache budget, one worker pool and one slow store
//!   (one set of permits) for every file.
//! * **One stream per open file handle**: opening a file with read access gives the
//!   handle a [`StreamReader`] with its own policy (and the model given to the mount,
//!   if any); the reader is dropped when the handle is released, and its unused
//!   prefetches with it. Reads of one handle are served one at a time, in the order
//!   they arrive, so the policy sees the handle's stream in order.
//! * **One engine file per real file**: handles of the same file (device and inode)
//!   share one [`DataFile`], so what one handle prefetched another can use, and a
//!   write through any handle drops the cached bytes it overlaps for all of them.
//! * **The backend** is the real file, reopened read-only through `/proc/self/fd` of
//!   the handle that opened it (so a renamed or unlinked file is still the one read),
//!   with `O_DIRECT` where the source file system allows it, behind the slow-store
//!   model (`latency + bytes/bandwidth`) or with no modelled cost.
//! * **Reads are byte-exact.** Every read returns the bytes the source file holds:
//!   from a prefetch of exactly that range made after the last change through the
//!   mount, or from the file. Writes, truncations and `fallocate` through the mount go
//!   to the real file first and then invalidate the cached bytes they overlap (from the
//!   new end on, for a truncation); the size the engine reads up to is the real file's,
//!   looked up on every read. Changes made to the source directly, bypassing the mount,
//!   are not seen by prefetches already cached.
//! * **Fallback.** A handle whose file cannot be reopened for the engine (for example
//!   a file the daemon may write but not read) is served with plain `pread`: its reads
//!   are counted apart ([`MountCounts::passthrough_reads`]) and the first reason kept.
//!
//! What the daemon sees depends on the FUSE mode: with direct I/O (`FOPEN_DIRECT_IO`)
//! every application read arrives unchanged (split only above the kernel's 1 MiB
//! per-request limit) and the policy sees the application's own pattern; in cached
//! mode the kernel's page cache and its readahead sit in front and the policy sees
//! page-cache misses and readahead chunks instead.

use crate::live::{self, Render};
use crate::passthrough::PassthroughFs;
use crate::passthrough::{DataChange, FileId, FileReader, IoEvent, Observer, Options};
use crate::session::{self, Ended, MountConfig};
use crate::{FsError, Result};
use patio_core::trace::Op;
use patio_prefetch::{
    DataFile, Engine, EngineConfig, FileHandle, PolicyKind, SlowStore, Stats, StoreConfig,
    StreamReader,
};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `policy` (with `model`, bytes of a saved model) can serve a mount: the
/// oracle cannot (a mount does not know the future), markov needs a trained model,
/// and a model must be one the policy loads.
pub fn check_policy(policy: PolicyKind, model: Option<&[u8]>) -> Result<()> {
    match (policy, model) {
        (PolicyKind::Oracle, _) => Err(FsError::Invalid(
            "the oracle policy needs each stream's future requests, which a mount cannot \
             know; it is a bound for `patio replay` and `patio bench prefetch` only"
                .into(),
        )),
        (PolicyKind::Markov, None) => Err(FsError::Invalid(
            "the markov policy needs a model trained on an earlier run: --model FILE \
             (written by `patio replay TRACE --policy markov --save-model FILE`)"
                .into(),
        )),
        _ => policy
            .build(&[], model)
            .map(|_| ())
            .map_err(|e| FsError::Invalid(e.to_string())),
    }
}

/// What `patio mount prefetch` asked for.
#[derive(Clone, Debug)]
pub struct PrefetchMount {
    pub source: PathBuf,
    pub mountpoint: PathBuf,
    pub policy: PolicyKind,
    /// A model saved by an earlier run, in the form the policy loads (a `PMKV` blob
    /// for markov, a `PPRD` blob for pattern); every handle starts from it.
    pub model: Option<Vec<u8>>,
    /// Open files with `FOPEN_DIRECT_IO` (the default of the passthrough) or through
    /// the kernel's page cache.
    pub direct_io: bool,
    pub store: StoreConfig,
    pub engine: EngineConfig,
    pub allow_other: bool,
    /// Files written when the mount ends (checked before mounting).
    pub outputs: Vec<(PathBuf, &'static str, &'static str)>,
}

/// Counters of the mount itself, beside the engine's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountCounts {
    /// Read requests served (through the engine or, for fallback handles, `pread`).
    pub reads: u64,
    /// Reads of fallback handles, served with `pread` and not in the engine's counters.
    pub passthrough_reads: u64,
    pub writes: u64,
    pub written_bytes: u64,
    /// Changes reported for files the engine held (each dropped what it overlapped).
    pub invalidations: u64,
    /// Handles opened with read access and served by the engine; distinct files among
    /// them; handles that fell back to `pread`.
    pub handles: u64,
    pub files: u64,
    pub fallback_handles: u64,
}

/// What a finished prefetch mount did.
#[derive(Clone, Debug)]
pub struct PrefetchSummary {
    /// The engine's counters, after unused prefetches were counted as waste.
    pub stats: Stats,
    pub counts: MountCounts,
    /// How the backend read the files (`O_DIRECT` or buffered, and why), as first seen.
    pub io_mode: Option<String>,
    /// Why the first fallback handle could not use the engine.
    pub fallback_reason: Option<String>,
    pub ended: Ended,
}

/// An engine file and the handles using it.
struct Shared {
    handle: FileHandle,
    readers: usize,
}

#[derive(Default)]
struct Counts {
    reads: AtomicU64,
    writes: AtomicU64,
    written_bytes: AtomicU64,
    invalidations: AtomicU64,
    handles: AtomicU64,
    files: AtomicU64,
    fallback_handles: AtomicU64,
}

struct Inner {
    engine: Engine,
    store: Arc<SlowStore>,
    source: PathBuf,
    policy: PolicyKind,
    model: Option<Vec<u8>>,
    files: Mutex<HashMap<FileId, Shared>>,
    counts: Counts,
    io_mode: Mutex<Option<String>>,
    fallback_reason: Mutex<Option<String>>,
}

/// The observer of the prefetch mount: serves reads through the engine and drops
/// overwritten bytes from its cache.
pub struct Prefetcher {
    inner: Arc<Inner>,
}

impl Prefetcher {
    /// An engine over `source` (the mount's source directory, for messages) with
    /// `policy` per handle, each starting from `model` (already checked with
    /// [`check_policy`]).
    pub fn new(
        source: PathBuf,
        policy: PolicyKind,
        model: Option<Vec<u8>>,
        store: StoreConfig,
        engine: EngineConfig,
    ) -> Self {
        Prefetcher {
            inner: Arc::new(Inner {
                engine: Engine::new(engine),
                store: SlowStore::new(store),
                source,
                policy,
                model,
                files: Mutex::new(HashMap::new()),
                counts: Counts::default(),
                io_mode: Mutex::new(None),
                fallback_reason: Mutex::new(None),
            }),
        }
    }

    /// Counters of the mount so far.
    pub fn counts(&self) -> MountCounts {
        let c = &self.inner.counts;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let reads = g(&c.reads);
        MountCounts {
            reads,
            passthrough_reads: reads.saturating_sub(self.inner.engine.stats().requests),
            writes: g(&c.writes),
            written_bytes: g(&c.written_bytes),
            invalidations: g(&c.invalidations),
            handles: g(&c.handles),
            files: g(&c.files),
            fallback_handles: g(&c.fallback_handles),
        }
    }

    /// Ends the run: prefetches not started are cancelled, unused ones counted as
    /// waste; returns the summary.
    pub fn finish(&self, ended: Ended) -> PrefetchSummary {
        let stats = self.inner.engine.quiesce();
        self.summary(stats, ended)
    }

    /// The counters of the running mount, nothing cancelled (live statistics).
    pub fn snapshot(&self) -> PrefetchSummary {
        self.summary(self.inner.engine.stats(), Ended::Running)
    }

    fn summary(&self, stats: Stats, ended: Ended) -> PrefetchSummary {
        PrefetchSummary {
            counts: self.counts(),
            stats,
            io_mode: lock(&self.inner.io_mode).clone(),
            fallback_reason: lock(&self.inner.fallback_reason).clone(),
            ended,
        }
    }

    fn fallback(&self, why: String) -> Option<Box<dyn FileReader>> {
        self.inner
            .counts
            .fallback_handles
            .fetch_add(1, Ordering::Relaxed);
        log::info!("{why}: this handle is served with pread, not the prefetch engine");
        lock(&self.inner.fallback_reason).get_or_insert(why);
        None
    }
}

/// The reads of one open file handle.
struct Reader {
    inner: Arc<Inner>,
    id: FileId,
    handle: FileHandle,
    stream: Mutex<StreamReader>,
}

impl FileReader for Reader {
    fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], _pid: u32) -> io::Result<usize> {
        // The real size, whoever changed it (a write through another handle, a
        // truncation): reads stop there.
        let size = file.metadata()?.len();
        let data = self.handle.file();
        if data.size() != size {
            data.set_size(size);
        }
        lock(&self.stream).read_at(offset, buf)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut files = lock(&self.inner.files);
        if let Some(s) = files.get_mut(&self.id) {
            s.readers -= 1;
            if s.readers == 0 {
                files.remove(&self.id);
            }
        }
    }
}

impl Observer for Prefetcher {
    fn io(&self, e: &IoEvent<'_>) {
        let c = &self.inner.counts;
        match e.op {
            Op::Read => {
                c.reads.fetch_add(1, Ordering::Relaxed);
            }
            Op::Write => {
                c.writes.fetch_add(1, Ordering::Relaxed);
                c.written_bytes.fetch_add(e.length, Ordering::Relaxed);
            }
        }
    }

    fn open_reader(&self, path: &Arc<str>, id: FileId, file: &File) -> Option<Box<dyn FileReader>> {
        let inner = &self.inner;
        let policy = match inner.policy.build(&[], inner.model.as_deref()) {
            Ok(p) => p,
            Err(e) => return self.fallback(e.to_string()),
        };
        let handle = {
            let mut files = lock(&inner.files);
            match files.get_mut(&id) {
                Some(s) => {
                    s.readers += 1;
                    s.handle.clone()
                }
                None => {
                    let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                    let name = inner.source.join(&**path);
                    let data = match DataFile::open_named(&link, &name, inner.store.clone()) {
                        Ok(d) => d,
                        Err(e) => {
                            drop(files);
                            return self.fallback(format!("{}: {e}", name.display()));
                        }
                    };
                    log::debug!("{}: backend reads {}", name.display(), data.io_mode());
                    lock(&inner.io_mode).get_or_insert_with(|| data.io_mode().to_string());
                    let handle = inner.engine.add_file(data);
                    files.insert(
                        id,
                        Shared {
                            handle: handle.clone(),
                            readers: 1,
                        },
                    );
                    inner.counts.files.fetch_add(1, Ordering::Relaxed);
                    handle
                }
            }
        };
        inner.counts.handles.fetch_add(1, Ordering::Relaxed);
        let stream = inner.engine.stream(&handle, policy);
        Some(Box::new(Reader {
            inner: inner.clone(),
            id,
            handle,
            stream: Mutex::new(stream),
        }))
    }

    fn changed(&self, id: FileId, change: DataChange) {
        let inner = &self.inner;
        let Some(handle) = lock(&inner.files).get(&id).map(|s| s.handle.clone()) else {
            return;
        };
        let data = handle.file();
        match change {
            DataChange::Written { offset, len } => {
                data.pace_write(offset, len);
                inner.engine.invalidate(&handle, offset, len);
                let end = offset.saturating_add(len);
                if len < u64::MAX - offset && end > data.size() {
                    data.set_size(end);
                }
            }
            DataChange::Resized { size } => {
                inner.engine.invalidate(&handle, size, u64::MAX - size);
                data.set_size(size);
            }
        }
        inner.counts.invalidations.fetch_add(1, Ordering::Relaxed);
    }
}

/// Checks the inputs, mounts the prefetching passthrough, serves until the mount ends
/// and returns the counters. `notify` receives one-line messages for the user while
/// mounted; `live`, when given, publishes the counters while the mount runs
/// ([`crate::live`]).
pub fn run(
    req: &PrefetchMount,
    notify: &mut dyn FnMut(&str),
    live: Option<Render<PrefetchSummary>>,
) -> Result<PrefetchSummary> {
    check_policy(req.policy, req.model.as_deref())?;
    let source = session::check_source(&req.source)?;
    let mountpoint = session::check_mountpoint(&req.mountpoint, &source)?;
    for (out, flag, what) in &req.outputs {
        crate::check_output(out, &mountpoint, flag, what)?;
    }
    session::check_fuse()?;
    let prefetcher = Arc::new(Prefetcher::new(
        source.clone(),
        req.policy,
        req.model.clone(),
        req.store.clone(),
        req.engine.clone(),
    ));
    let options = Options {
        direct_io: req.direct_io,
        ..Options::default()
    };
    let fs = PassthroughFs::new(source, options, prefetcher.clone());
    let cfg = MountConfig {
        allow_other: req.allow_other,
        ..MountConfig::default()
    };
    let publisher = {
        let p = prefetcher.clone();
        live::start(&mountpoint, live, move || p.snapshot())
    };
    let ended = session::serve(fs, &mountpoint, &cfg, notify);
    drop(publisher);
    Ok(prefetcher.finish(ended?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use patio_prefetch::rng::Rng;
    use std::os::unix::fs::{FileExt, MetadataExt};

    fn id_of(f: &File) -> FileId {
        let m = f.metadata().unwrap();
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    fn prefetcher(policy: PolicyKind) -> Prefetcher {
        let engine = EngineConfig {
            budget: 1 << 20,
            ..EngineConfig::default()
        };
        Prefetcher::new(
            PathBuf::from("/src"),
            policy,
            None,
            StoreConfig::instant(),
            engine,
        )
    }

    #[test]
    fn policies_a_mount_cannot_use_are_refused_with_a_reason() {
        let msg = |k, m: Option<&[u8]>| check_policy(k, m).unwrap_err().to_string();
        assert!(msg(PolicyKind::Oracle, None).contains("future requests"));
        assert!(msg(PolicyKind::Markov, None).contains("--model"));
        assert!(msg(PolicyKind::Stride, Some(b"x")).contains("takes no model"));
        assert!(msg(PolicyKind::Markov, Some(b"junk")).contains("markov model"));
        let model = patio_prefetch::Markov::new(4096).save_bytes();
        check_policy(PolicyKind::Markov, Some(&model)).unwrap();
        for k in [PolicyKind::None, PolicyKind::Readahead, PolicyKind::Pattern] {
            check_policy(k, None).unwrap();
        }
    }

    /// Random reads, writes and truncations through two handles of one file, each
    /// with its own stream, against a byte vector: every read returns the current
    /// bytes, whatever was prefetched before the change.
    #[test]
    fn reads_through_handles_follow_writes_and_truncations() {
        for policy in [
            PolicyKind::Readahead,
            PolicyKind::Stride,
            PolicyKind::Pattern,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.bin");
            let mut rng = Rng::new(policy as u64 + 11);
            let mut model: Vec<u8> = (0..300_000).map(|_| rng.below(256) as u8).collect();
            std::fs::write(&path, &model).unwrap();
            let p = prefetcher(policy);
            let name: Arc<str> = "f.bin".into();
            let files: Vec<File> = (0..2)
                .map(|_| {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&path)
                        .unwrap()
                })
                .collect();
            let id = id_of(&files[0]);
            let readers: Vec<Box<dyn FileReader>> = files
                .iter()
                .map(|f| p.open_reader(&name, id, f).expect("engine reader"))
                .collect();
            assert_eq!(p.counts().files, 1, "both handles share one engine file");
            let mut at = [0u64; 2];
            for step in 0..600u64 {
                let h = (step % 2) as usize;
                match rng.below(20) {
                    0 => {
                        let off = rng.below(model.len() as u64 + 1000);
                        let len = rng.range(1, 20_000) as usize;
                        let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                        files[h].write_all_at(&bytes, off).unwrap();
                        p.changed(
                            id,
                            DataChange::Written {
                                offset: off,
                                len: len as u64,
                            },
                        );
                        let end = off as usize + len;
                        if end > model.len() {
                            model.resize(end, 0);
                        }
                        model[off as usize..end].copy_from_slice(&bytes);
                    }
                    1 => {
                        let size = rng.range(50_000, 320_000);
                        files[h].set_len(size).unwrap();
                        p.changed(id, DataChange::Resized { size });
                        model.resize(size as usize, 0);
                    }
                    _ => {
                        // Mostly strided streams (what the policies predict), some jumps.
                        let len = 4096 * rng.range(1, 4);
                        at[h] = if rng.below(8) == 0 {
                            rng.below(model.len() as u64)
                        } else {
                            (at[h] + 3 * 4096) % (model.len() as u64 + 4096)
                        };
                        let mut buf = vec![0u8; len as usize];
                        let n = readers[h].read_at(&files[h], at[h], &mut buf, 1).unwrap();
                        let lo = (at[h] as usize).min(model.len());
                        let hi = (at[h] as usize + len as usize).min(model.len());
                        assert_eq!(&buf[..n], &model[lo..hi], "{policy} step {step}");
                    }
                }
            }
            drop(readers);
            assert!(
                lock(&p.inner.files).is_empty(),
                "released handles free the file"
            );
            let s = p.finish(Ended::Unmounted);
            assert_eq!(
                s.stats.hits + s.stats.late_hits + s.stats.misses,
                s.stats.requests
            );
            assert!(s.counts.invalidations > 0);
            assert_eq!(
                s.stats.prefetched_bytes,
                s.stats.used_bytes + s.stats.wasted_bytes
            );
            if policy != PolicyKind::Readahead {
                assert!(s.stats.cache_bytes > 0, "{policy}: prefetches were used");
            }
        }
    }

    #[test]
    fn a_file_the_engine_cannot_reopen_falls_back_to_pread() {
        let p = prefetcher(PolicyKind::Stride);
        // A socket: /proc/self/fd cannot reopen it.
        let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let f = File::from(std::os::fd::OwnedFd::from(sock));
        let id = id_of(&f);
        let name: Arc<str> = "d".into();
        assert!(p.open_reader(&name, id, &f).is_none());
        let s = p.finish(Ended::Unmounted);
        assert_eq!((s.counts.fallback_handles, s.counts.handles), (1, 0));
        assert!(s.fallback_reason.unwrap().contains("/src/d"));
    }
}
