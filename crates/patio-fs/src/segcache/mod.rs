//! The segment-grouping cache mount (`patio mount cache`): a passthrough mount whose
//! reads go through a memory tier, then a segment store on local disk, then SOURCE
//! behind the storage model, with the `none`, `lru` and `group` policies of
//! [`core`].
//!
//! | module | role |
//! |---|---|
//! | [`graph`] | successor graph (recent popularity, j of k), groups (SCCs split and packed) |
//! | [`stride`] | strided streams: their next periods as groups brought ahead |
//! | [`store`] | the slot file (preallocated, `O_DIRECT`) and the slot allocator |
//! | [`table`] | the persisted segment table (framed, checksummed, generation-numbered) |
//! | [`memtier`] | the memory tier: the LRU of demand items beside the items groups bring ahead |
//! | [`config`] | the policy and the budgets |
//! | `pay` | whether a file's groups earn their place |
//! | [`core`] | the tiers, the policies, invalidation, what groups may cost |
//! | [`stats`] | the counters |
//! | this module | the cache directory (checks, lock, warm start, saves), the observer, the mount |

pub mod config;
pub mod core;
mod fill;
pub mod graph;
pub mod memtier;
mod pay;
pub mod stats;
pub mod store;
pub mod stride;
pub mod table;
#[cfg(test)]
mod tests;

use self::core::{lock, stat_of, Cache, CacheConfig, FileState, Policy, State};
use self::stats::CacheStats;
use self::store::SegmentFile;
use self::table::{SegmentRec, Table, TableError};
use crate::live::{self, Render};
use crate::passthrough::{
    DataChange, FileId, FileReader, IoEvent, Observer, Options, PassthroughFs,
};
use crate::session::{self, Ended, MountConfig};
use crate::{shown, FsError, Result};
use patio_prefetch::{DataFile, SlowStore, StoreConfig};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const SEGMENTS_FILE: &str = "segments.dat";
pub const LOCK_FILE: &str = "lock";
/// Files whose source descriptors stay open after their last handle closed.
pub const KEEP_CLOSED: usize = 256;

/// A cache directory's problem as one line.
fn dir_error(dir: &Path, what: &str, e: io::Error) -> FsError {
    let d = shown(dir);
    match e.raw_os_error() {
        Some(libc::EROFS) => {
            FsError::Invalid(format!("cache directory {d} is on a read-only file system"))
        }
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            FsError::Invalid(format!("cache directory {d}: no space left for {what}"))
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            FsError::Invalid(format!("cache directory {d}: permission denied ({what})"))
        }
        _ => FsError::io(format!("cache directory {d}: {what}"), e),
    }
}

/// Opens the cache directory `dir` for `cfg`: creates it, takes its lock, loads the
/// saved table when it matches (a warm start) and opens the slot file. Returns the
/// cache and, for a cold start over an unusable table, why.
pub fn open_cache(dir: Option<&Path>, cfg: &CacheConfig) -> Result<(Cache, Option<String>)> {
    cfg.check().map_err(FsError::Invalid)?;
    let Some(dir) = dir.filter(|_| cfg.policy != Policy::None) else {
        return Ok((
            Cache {
                cfg: cfg.clone(),
                state: Mutex::new(State::new(cfg, 0)),
                store: None,
                dir: None,
                _lock: None,
            },
            None,
        ));
    };
    // A directory this start created goes again when the start fails (a full disk
    // leaves nothing behind).
    let created = !dir.exists();
    fs::create_dir_all(dir).map_err(|e| dir_error(dir, "creating it", e))?;
    let opened = open_existing(dir, cfg);
    if opened.is_err() && created {
        let _ = fs::remove_dir_all(dir);
    }
    opened
}

/// [`open_cache`] of the directory `dir`, which exists.
fn open_existing(dir: &Path, cfg: &CacheConfig) -> Result<(Cache, Option<String>)> {
    let dir = fs::canonicalize(dir).map_err(|e| dir_error(dir, "resolving it", e))?;
    let lockf = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| dir_error(&dir, "its lock file", e))?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::flock(lockf.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(FsError::Invalid(format!(
            "cache directory {} is in use by another patio mount",
            shown(&dir)
        )));
    }
    let slots = cfg.slots() as u32;
    let mut note = None;
    let table = match Table::load(&dir) {
        Ok(Some(t))
            if t.slot_size == cfg.slot_size()
                && t.slots == slots
                && t.item_size == cfg.item
                && t.policy == cfg.policy.code() =>
        {
            Some(t)
        }
        Ok(Some(_)) => {
            note = Some("made with other settings (policy, sizes): starting cold".to_string());
            None
        }
        Ok(None) => None,
        Err(TableError::Newer(v)) => {
            return Err(FsError::Invalid(format!(
                "cache directory {} was written by a newer patio (segment table format {v}); \
                 use another --cache-dir or remove it",
                shown(&dir)
            )))
        }
        Err(TableError::Damaged(why)) => {
            note = Some(format!("damaged segment table ({why}): starting cold"));
            None
        }
        Err(TableError::Io(e)) => return Err(dir_error(&dir, "reading its table", e)),
    };
    if table.is_none() {
        match fs::remove_file(dir.join(table::TABLE_FILE)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(dir_error(&dir, "removing the old table", e))
            }
            _ => {}
        }
    }
    let store =
        SegmentFile::open(&dir.join(SEGMENTS_FILE), cfg.slot_size(), slots).map_err(|e| {
            dir_error(
                &dir,
                &format!(
                    "the segment store ({slots} slots of {} bytes)",
                    cfg.slot_size()
                ),
                e,
            )
        })?;
    let mut state = State::new(cfg, slots);
    if let Some(t) = table {
        warm(&mut state, t);
    }
    Ok((
        Cache {
            cfg: cfg.clone(),
            state: Mutex::new(state),
            store: Some(store),
            dir: Some(dir),
            _lock: Some(lockf),
        },
        note,
    ))
}

/// Restores a saved table: its files (checked against SOURCE when opened) and slots
/// (plain ones read one item at a time, segments whole).
fn warm(st: &mut State, t: Table) {
    for (i, rec) in t.files.into_iter().enumerate() {
        st.by_id.insert((rec.dev, rec.ino), i as u32);
        st.files.push(FileState {
            rec,
            epoch: 0,
            pay: Default::default(),
            data: None,
            stat_file: None,
            open: 0,
        });
    }
    for seg in t.segments {
        let mut items = Vec::new();
        for e in seg.entries {
            st.disk.insert(e.item, (seg.slot, e));
            items.push(e.item);
        }
        st.stats.warm_items += items.len() as u64;
        st.slot_items.insert(seg.slot, items);
        st.alloc.touch(seg.slot);
        if seg.plain {
            st.plain_slots.insert(seg.slot);
        }
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Cache {
    /// The table of what the store holds now. Items of files changed within the last
    /// second are left out: a later change in the same timestamp tick could not be
    /// told apart after a restart.
    fn snapshot(&self, st: &mut State) -> Table {
        let racy = now_ns() - 1_000_000_000;
        let fresh = |f: &FileState| f.rec.mtime_ns < racy && f.rec.ctime_ns < racy;
        let mut segments: Vec<SegmentRec> = st
            .slot_items
            .iter()
            .map(|(&slot, items)| SegmentRec {
                slot,
                plain: st.plain_slots.contains(&slot),
                entries: items
                    .iter()
                    .filter_map(|i| st.disk.get(i).filter(|(s, _)| *s == slot).map(|(_, e)| *e))
                    .filter(|e| fresh(&st.files[e.item.file as usize]))
                    .collect(),
            })
            .filter(|s| !s.entries.is_empty())
            .collect();
        segments.sort_by_key(|s| s.slot);
        st.stats.table_saves += 1;
        Table {
            generation: st.stats.table_saves,
            slot_size: self.cfg.slot_size(),
            slots: st.alloc.slots(),
            item_size: self.cfg.item,
            policy: self.cfg.policy.code(),
            files: st.files.iter().map(|f| f.rec.clone()).collect(),
            segments,
            counters: st.stats.named(),
        }
    }

    /// Saves the table if the store changed since the last save (the slot file is
    /// made durable first).
    pub fn save(&self) -> io::Result<()> {
        let (Some(dir), Some(store)) = (&self.dir, &self.store) else {
            return Ok(());
        };
        let mut table = {
            let mut st = lock(&self.state);
            if !st.dirty {
                return Ok(());
            }
            st.dirty = false;
            self.snapshot(&mut st)
        };
        store.sync()?;
        // Generations continue across runs.
        if let Ok(Some(old)) = Table::load(dir) {
            table.generation += old.generation;
        }
        table.save(dir)
    }

    /// In an idle period: rebuilds the groups if the graph changed, writes a few
    /// groups not yet stored as segments (the grouping I/O, reading SOURCE for what
    /// memory does not hold) and saves the table.
    /// The time it takes is counted (`idle_work_ns`): work done while nobody waits
    /// is still work a benchmark must charge.
    fn idle_work(&self) {
        let start = std::time::Instant::now();
        self.idle_steps();
        let spent = start.elapsed().as_nanos() as u64;
        lock(&self.state).stats.idle_work_ns += spent;
    }

    fn idle_steps(&self) {
        if self.cfg.policy == Policy::Group && lock(&self.state).disabled.is_none() {
            let todo = {
                let mut st = lock(&self.state);
                if st.graph.pending_changes() > 0 {
                    let per = (self.cfg.segment / self.cfg.item) as usize;
                    st.rebuild(per);
                }
                st.unstored_groups(4)
            };
            let since = lock(&self.state).last_request;
            for g in todo {
                {
                    let st = lock(&self.state);
                    if st.last_request != since {
                        break; // requests again: not idle any more
                    }
                    if !st.grouping_affords(st.fill_cost(&g, self.cfg.item)) {
                        break; // grouping I/O at its cap
                    }
                }
                if let Err(e) = self.fill_group(None, &g) {
                    self.fault("writing the segment store", &e);
                    break;
                }
            }
        }
        if let Err(e) = self.save() {
            lock(&self.state).dirty = true;
            log::warn!("cannot save the segment table: {e}");
        }
    }

    /// Registers an open handle of the source file at `rel`; returns its index.
    fn open_file(&self, rel: &str, meta: &fs::Metadata, file: File, data: Arc<DataFile>) -> u32 {
        let mut st = lock(&self.state);
        let now = stat_of(rel, meta);
        let idx = match st.by_id.get(&(now.dev, now.ino)) {
            Some(&i) => i,
            None => {
                let i = st.files.len() as u32;
                st.by_id.insert((now.dev, now.ino), i);
                st.files.push(FileState {
                    rec: now.clone(),
                    epoch: 0,
                    pay: Default::default(),
                    data: None,
                    stat_file: None,
                    open: 0,
                });
                i
            }
        };
        if st.revalidate(idx, now) {
            st.stats.stale_files += 1;
        }
        let f = &mut st.files[idx as usize];
        f.open += 1;
        if f.data.is_none() {
            f.data = Some(data);
            f.stat_file = Some(file);
        }
        idx
    }

    /// The last handle of a file closed. Its source descriptors stay open (for
    /// grouping in idle periods) while at most [`KEEP_CLOSED`] files are kept so.
    fn close_file(&self, idx: u32) {
        let mut st = lock(&self.state);
        st.files[idx as usize].open -= 1;
        if st.files[idx as usize].open > 0 {
            return;
        }
        let kept = st
            .files
            .iter()
            .filter(|f| f.open == 0 && f.data.is_some())
            .count();
        if kept > KEEP_CLOSED {
            let f = &mut st.files[idx as usize];
            f.data = None;
            f.stat_file = None;
        }
    }

    /// Compares the file with what was recorded (dropping its items if it changed)
    /// and returns its current size and the epoch that size belongs to: a read
    /// fills under that epoch, so that a change after this check drops what it
    /// read (an item cut at the old size must not outlive an extension).
    fn check(&self, idx: u32, meta: &fs::Metadata) -> (u64, u64) {
        let mut st = lock(&self.state);
        let now = stat_of(&st.files[idx as usize].rec.path, meta);
        let size = now.size;
        if st.revalidate(idx, now) {
            st.stats.stale_files += 1;
        }
        if let Some(d) = &st.files[idx as usize].data {
            d.set_size(size);
        }
        (size, st.files[idx as usize].epoch)
    }

    /// A change through the mount is about to happen: a change made outside the mount
    /// before it must be seen now, since the change's own report records the file's
    /// version afterwards.
    fn before_change(&self, idx: u32, source: &Path) {
        let mut st = lock(&self.state);
        let f = &st.files[idx as usize];
        let meta = match &f.stat_file {
            Some(file) => file.metadata(),
            None => fs::symlink_metadata(source.join(&f.rec.path)),
        };
        if let Ok(m) = meta {
            let now = stat_of(&f.rec.path.clone(), &m);
            if st.revalidate(idx, now) {
                st.stats.stale_files += 1;
            }
        }
    }

    /// A change through the mount: drops the items it overlaps (and the last one if
    /// the file grows), then records the file's new version.
    fn changed(&self, idx: u32, change: DataChange, source: &Path) {
        let b = self.cfg.item;
        let mut st = lock(&self.state);
        let old = st.files[idx as usize].rec.size;
        match change {
            DataChange::Written { offset, len } => {
                let end = offset.saturating_add(len.max(1));
                st.drop_range(idx, offset / b, (end - 1) / b);
                if end > old {
                    st.drop_range(idx, old / b, old / b);
                }
            }
            DataChange::Resized { size } => st.drop_range(idx, size.min(old) / b, u64::MAX),
        }
        let f = &st.files[idx as usize];
        let meta = match &f.stat_file {
            Some(file) => file.metadata(),
            None => fs::symlink_metadata(source.join(&f.rec.path)),
        };
        if let Ok(m) = meta {
            let path = f.rec.path.clone();
            let rec = stat_of(&path, &m);
            if let Some(d) = &st.files[idx as usize].data {
                d.set_size(rec.size);
            }
            st.files[idx as usize].rec = rec;
        }
    }
}

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
        let st = lock(&self.cache.state);
        CacheSummary {
            stats: st.stats.clone(),
            cold_reason,
            disabled: st.disabled.clone(),
            store_direct: self.cache.store.as_ref().map(SegmentFile::direct),
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

/// The reads of one open handle.
struct Reader {
    cache: Arc<Cache>,
    idx: u32,
}

impl FileReader for Reader {
    fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], pid: u32) -> io::Result<usize> {
        let (size, epoch) = self.cache.check(self.idx, &file.metadata()?);
        self.cache.read(self.idx, size, epoch, offset, buf, pid)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.cache.close_file(self.idx);
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
        let idx = self.cache.open_file(path, &meta, dup, Arc::new(data));
        Some(Box::new(Reader {
            cache: self.cache.clone(),
            idx,
        }))
    }

    fn changing(&self, id: FileId) {
        let idx = lock(&self.cache.state)
            .by_id
            .get(&(id.dev, id.ino))
            .copied();
        if let Some(idx) = idx {
            self.cache.before_change(idx, &self.source);
        }
    }

    fn changed(&self, id: FileId, change: DataChange) {
        let idx = lock(&self.cache.state)
            .by_id
            .get(&(id.dev, id.ino))
            .copied();
        if let DataChange::Written { offset, len } = change {
            // At the file's modelled address while it is open through the store.
            let data = idx.and_then(|i| lock(&self.cache.state).files[i as usize].data.clone());
            let len = len.min(u64::MAX - offset);
            match data {
                Some(d) => d.pace_write(offset, len),
                None => self.store.pace_write(offset, len),
            }
        }
        if let Some(idx) = idx {
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
                let quiet = lock(&cache.state).last_request.elapsed();
                if quiet >= cache.cfg.idle {
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
