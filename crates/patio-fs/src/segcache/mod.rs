//! The segment-grouping cache mount (`patio mount cache`): a passthrough mount whose
//! reads go through the cache of `patio-cache` (a memory tier, then a segment store on
//! local disk, then SOURCE behind the storage model; policies `none`, `lru` and
//! `group`). This module is the FUSE glue: the observer that hands each open file's
//! reads to the cache and reports changes to it, the idle thread, the mount, `stat`.

#[cfg(test)]
mod tests;

use crate::live::{self, Render};
use crate::passthrough::{
    DataChange, FileId, FileReader, IoEvent, Observer, Options, PassthroughFs,
};
use crate::session::{self, Ended, MountConfig};
use crate::{shown, FsError, Result};
use patio_cache::core::lock;
use patio_cache::{
    open_cache, Cache, CacheConfig, CacheStats, Change, OpenFile, Policy, Table, TableError,
};
use patio_prefetch::{DataFile, SlowStore, StoreConfig};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What `patio mount cache` asked for.
#[derive(Clone, Debug)]
pub struct CacheMount {
    pub source: PathBuf,
    pub mountpoint: PathBuf,
    pub cache_dir: PathBuf,
    pub cache: CacheConfig,
    pub store: StoreConfig,
    pub allow_other: bool,
    /// Files written when the mount ends (checked before mounting).
    pub outputs: Vec<(PathBuf, &'static str, &'static str)>,
}

/// What a finished cache mount did.
#[derive(Clone, Debug)]
pub struct CacheSummary {
    pub stats: CacheStats,
    /// Why the start was cold over an existing table, if it was.
    pub cold_reason: Option<String>,
    /// Why the cache switched itself off during the mount, if it did.
    pub disabled: Option<String>,
    /// Whether the slot file is read and written with `O_DIRECT`.
    pub store_direct: Option<bool>,
    pub slots: u32,
    pub slots_used: usize,
    pub memory_bytes: u64,
    pub graph_items: usize,
    pub graph_bytes: u64,
    /// How SOURCE files are read (`O_DIRECT` or buffered), as first seen.
    pub io_mode: Option<String>,
    pub writes: u64,
    pub written_bytes: u64,
    pub fallback_handles: u64,
    pub fallback_reason: Option<String>,
    pub ended: Ended,
}

/// The observer of the cache mount.
pub struct CacheObserver {
    cache: Arc<Cache>,
    source: PathBuf,
    store: Arc<SlowStore>,
    writes: AtomicU64,
    written_bytes: AtomicU64,
    fallback_handles: AtomicU64,
    fallback_reason: Mutex<Option<String>>,
    io_mode: Mutex<Option<String>>,
}

impl CacheObserver {
    pub fn new(cache: Arc<Cache>, source: PathBuf, store: Arc<SlowStore>) -> Self {
        CacheObserver {
            cache,
            source,
            store,
            writes: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            fallback_handles: AtomicU64::new(0),
            fallback_reason: Mutex::new(None),
            io_mode: Mutex::new(None),
        }
    }

    /// Ends the run: saves the table and returns the summary.
    pub fn finish(&self, ended: Ended, cold_reason: Option<String>) -> CacheSummary {
        if let Err(e) = self.cache.save() {
            log::warn!("cannot save the segment table: {e}");
        }
        self.snapshot(ended, cold_reason)
    }

    /// The counters so far (`Ended::Running` while the mount serves); nothing saved.
    pub fn snapshot(&self, ended: Ended, cold_reason: Option<String>) -> CacheSummary {
        let st = self.cache.state();
        CacheSummary {
            stats: st.stats.clone(),
            cold_reason,
            disabled: st.disabled.clone(),
            store_direct: self.cache.store_direct(),
            slots: st.alloc.slots(),
            slots_used: st.alloc.used(),
            memory_bytes: st.mem_bytes(),
            graph_items: st.graph.len(),
            graph_bytes: st.graph.memory_bytes(),
            io_mode: lock(&self.io_mode).clone(),
            writes: self.writes.load(Ordering::Relaxed),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            fallback_handles: self.fallback_handles.load(Ordering::Relaxed),
            fallback_reason: lock(&self.fallback_reason).clone(),
            ended,
        }
    }

    fn fallback(&self, why: String) -> Option<Box<dyn FileReader>> {
        self.fallback_handles.fetch_add(1, Ordering::Relaxed);
        log::info!("{why}: this handle is served with pread, not the cache");
        lock(&self.fallback_reason).get_or_insert(why);
        None
    }
}

/// The reads of one open handle go through the cache.
impl FileReader for OpenFile {
    fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], pid: u32) -> io::Result<usize> {
        OpenFile::read_at(self, file, offset, buf, pid)
    }
}

impl Observer for CacheObserver {
    fn io(&self, e: &IoEvent<'_>) {
        if e.op == patio_core::trace::Op::Write {
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.written_bytes.fetch_add(e.length, Ordering::Relaxed);
        }
    }

    fn open_reader(
        &self,
        path: &Arc<str>,
        _id: FileId,
        file: &File,
    ) -> Option<Box<dyn FileReader>> {
        let name = self.source.join(&**path);
        let meta = match file.metadata() {
            Ok(m) if m.is_file() => m,
            Ok(_) => return self.fallback(format!("{}: not a regular file", name.display())),
            Err(e) => return self.fallback(format!("{}: {e}", name.display())),
        };
        let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let data = match DataFile::open_named(&link, &name, self.store.clone()) {
            Ok(d) => d,
            Err(e) => return self.fallback(format!("{}: {e}", name.display())),
        };
        let dup = match file.try_clone() {
            Ok(f) => f,
            Err(e) => return self.fallback(format!("{}: {e}", name.display())),
        };
        log::debug!("{}: SOURCE reads {}", name.display(), data.io_mode());
        lock(&self.io_mode).get_or_insert_with(|| data.io_mode().to_string());
        Some(Box::new(self.cache.open(path, &meta, dup, Arc::new(data))))
    }

    fn changing(&self, id: FileId) {
        if let Some(idx) = self.cache.file_index(id.dev, id.ino) {
            self.cache.before_change(idx, &self.source);
        }
    }

    fn changed(&self, id: FileId, change: DataChange) {
        let idx = self.cache.file_index(id.dev, id.ino);
        if let DataChange::Written { offset, len } = change {
            // At the file's modelled address while it is open through the store.
            let data = idx.and_then(|i| self.cache.source_of(i));
            let len = len.min(u64::MAX - offset);
            match data {
                Some(d) => d.pace_write(offset, len),
                None => self.store.pace_write(offset, len),
            }
        }
        if let Some(idx) = idx {
            let change = match change {
                DataChange::Written { offset, len } => Change::Written { offset, len },
                DataChange::Resized { size } => Change::Resized { size },
            };
            self.cache.changed(idx, change, &self.source);
        }
    }
}

/// Checks the inputs, opens the cache directory, mounts, serves until the mount
/// ends (rebuilding groups and saving the table in idle periods) and returns the
/// counters. `notify` receives one-line messages for the user; `live`, when given,
/// publishes the counters while the mount runs ([`crate::live`]).
pub fn run(
    req: &CacheMount,
    notify: &mut dyn FnMut(&str),
    live: Option<Render<CacheSummary>>,
) -> Result<CacheSummary> {
    let source = session::check_source(&req.source)?;
    let mountpoint = session::check_mountpoint(&req.mountpoint, &source)?;
    if req.cache.policy != Policy::None {
        let dir = req
            .cache_dir
            .canonicalize()
            .unwrap_or(req.cache_dir.clone());
        if dir.starts_with(&source) || dir.starts_with(&mountpoint) {
            return Err(FsError::Invalid(format!(
                "cache directory {} lies inside the source or the mount point",
                shown(&req.cache_dir)
            )));
        }
    }
    for (out, flag, what) in &req.outputs {
        crate::check_output(out, &mountpoint, flag, what)?;
    }
    session::check_fuse()?;
    let store = SlowStore::try_new(req.store.clone())
        .map_err(|e| FsError::Invalid(format!("storage model: {e}")))?;
    let (cache, cold) = open_cache(Some(&req.cache_dir), &req.cache)?;
    if let Some(why) = &cold {
        notify(&format!("cache directory {}: {why}", shown(&req.cache_dir)));
    }
    let cache = Arc::new(cache);
    let observer = Arc::new(CacheObserver::new(cache.clone(), source.clone(), store));
    let stop = Arc::new(AtomicBool::new(false));
    let idle = {
        let (cache, stop) = (cache.clone(), stop.clone());
        std::thread::spawn(move || {
            let tick = Duration::from_millis(100);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                let quiet = cache.state().last_request.elapsed();
                if quiet >= cache.config().idle {
                    cache.idle_work();
                }
            }
        })
    };
    let options = Options {
        direct_io: true,
        ..Options::default()
    };
    let fs = PassthroughFs::new(source, options, observer.clone());
    let cfg = MountConfig {
        allow_other: req.allow_other,
        fsname: "patio-cache".into(),
        ..MountConfig::default()
    };
    let publisher = {
        let (obs, cold) = (observer.clone(), cold.clone());
        live::start(&mountpoint, live, move || {
            obs.snapshot(Ended::Running, cold.clone())
        })
    };
    let ended = session::serve(fs, &mountpoint, &cfg, notify);
    drop(publisher);
    stop.store(true, Ordering::Relaxed);
    let _ = idle.join();
    Ok(observer.finish(ended?, cold))
}

/// What `patio cache stat` shows of a cache directory.
pub fn stat(dir: &Path) -> Result<Table> {
    if !dir.is_dir() {
        return Err(FsError::Invalid(format!(
            "cache directory {} does not exist",
            shown(dir)
        )));
    }
    match Table::load(dir) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(FsError::Invalid(format!(
            "{} holds no segment table (not a cache directory, or never unmounted or idle)",
            shown(dir)
        ))),
        Err(TableError::Io(e)) => Err(FsError::io(format!("cache directory {}", shown(dir)), e)),
        Err(e) => Err(FsError::Invalid(format!(
            "cache directory {}: {e}",
            shown(dir)
        ))),
    }
}
