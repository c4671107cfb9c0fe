//! The container mount's state: what it keeps per open file (its writers per
//! process, its cached reader, its place), per open handle, and for the whole mount
//! (inodes, handles, counters), with the lookups every request starts with.

use super::compactor::Compactor;
use super::pending::Pending;
use super::UNLINKED_PREFIX;
use crate::fusekit::{self, enoent, errno_of, lock, Handles, Inodes, Listings, R};
use crate::tracing::process_of;
use fuser::{Errno, FileHandle, INodeNo, Request};
use patio_container::layout::Truncation;
use patio_container::{Appended, ContainerError, IndexMode, QuickStat, Reader, Thresholds, Writer};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Files nobody has open kept for their next open (see `Shared::resting`).
pub(super) const RESTING: usize = 16;

/// What a file nobody has open any more keeps for its next open: its reader (to be
/// refreshed, not rebuilt) and its `stat` (still fresh for the attribute lifetime).
pub(super) struct Resting {
    pub(super) dir: PathBuf,
    pub(super) reader: Option<Arc<Reader>>,
    pub(super) quick: Option<(Instant, QuickStat)>,
}

/// One process's writer of one file.
#[derive(Default)]
pub(super) struct Writing {
    /// Opened at the process's first write; `None` before it and after the writer
    /// was closed (its last handle released, or a truncation with a large log).
    pub(super) writer: Option<Writer>,
    /// Open handles this process has written through or opened for writing.
    pub(super) handles: usize,
    /// Written since the last publish (readers do not see it yet).
    pub(super) dirty: bool,
    /// Written since the last flush (not published at close yet).
    pub(super) unsynced: bool,
    /// When (in the mount's order of writes) this writer last became dirty: dirty
    /// writers publish in this order, so a write a read saw (through the overlay) is
    /// ordered before the other writers' later writes.
    pub(super) dirty_since: u64,
    /// The writer's last record key the file's generation accounts for: when the
    /// writer wrote a record by itself since, its buffer no longer holds every write
    /// readers miss, and reads publish instead of overlaying.
    pub(super) key_seen: u64,
}

pub(super) struct FileInner {
    /// Writing process → its writer.
    pub(super) procs: HashMap<u32, Arc<Mutex<Writing>>>,
    /// Open handles of the file.
    pub(super) handles: usize,
    /// Bumped whenever the file changed in a way only a refresh from the backend
    /// shows (see [`FileInner::changed`]).
    pub(super) generation: u64,
    pub(super) reader: Option<(u64, Arc<Reader>)>,
    /// Records this mount's writers appended, and truncations it appended, since the
    /// cached reader was built: laid over it at the next read
    /// (`Reader::with_appended`) instead of a refresh from the backend.
    pub(super) appended: Vec<Appended>,
    pub(super) truncated: Vec<Truncation>,
    /// Unlinked while open: the container lives on under a hidden name.
    pub(super) unlinked: bool,
}

/// Changes kept for the cached reader (`FileInner::appended`, `truncated`) past which
/// the next read refreshes from the backend instead.
const KEPT_CHANGES: usize = 1024;

impl FileInner {
    /// The file changed in a way only a refresh from the backend shows (or nobody
    /// keeps the changes): the cached reader is refreshed before the next read.
    pub(super) fn changed(&mut self) {
        self.generation += 1;
        self.appended.clear();
        self.truncated.clear();
    }

    fn keeps(&self, more: usize) -> bool {
        self.reader.is_some() && self.appended.len() + self.truncated.len() + more <= KEPT_CHANGES
    }

    /// Records this mount's writers appended (`Writer::take_appended`).
    pub(super) fn note_appended(&mut self, records: Vec<Appended>) {
        if records.is_empty() {
            return;
        }
        if self.keeps(records.len()) {
            self.appended.extend(records);
        } else {
            self.changed();
        }
    }

    /// A truncation this mount appended.
    pub(super) fn note_truncated(&mut self, t: Truncation) {
        if self.keeps(1) {
            self.truncated.push(t);
        } else {
            self.changed();
        }
    }
}

/// Where a file is: its path in the mount and its backend directory.
#[derive(Clone)]
pub(super) struct Loc {
    pub(super) rel: PathBuf,
    pub(super) dir: PathBuf,
}

/// A file that is open (or being changed) through the mount.
pub(super) struct FileState {
    pub(super) loc: RwLock<Loc>,
    pub(super) inner: Mutex<FileInner>,
    /// Writes since the last publish check (a hint: readers publish when non-zero).
    pub(super) unpublished: AtomicU64,
    /// The byte ranges of the writers' unpublished writes (see `pending`).
    pub(super) pending: Mutex<Pending>,
    /// End of the furthest write through the mount since the last truncation.
    pub(super) live_end: AtomicU64,
    pub(super) last_write_ns: AtomicU64,
    /// The mount's inode number of the file (set when opened): how `fstat` of an
    /// unlinked file still finds it.
    pub(super) ino: AtomicU64,
    /// The container's `stat` (its meta files and truncation log) and when it was
    /// read: attributes reuse it for the attribute lifetime the kernel is told
    /// (writes through the mount are in `live_end`; a truncation updates it).
    pub(super) quick: Mutex<Option<(Instant, QuickStat)>>,
}

impl FileState {
    pub(super) fn new(rel: PathBuf, dir: PathBuf) -> Self {
        FileState {
            loc: RwLock::new(Loc { rel, dir }),
            inner: Mutex::new(FileInner {
                procs: HashMap::new(),
                handles: 0,
                generation: 0,
                reader: None,
                appended: Vec::new(),
                truncated: Vec::new(),
                unlinked: false,
            }),
            unpublished: AtomicU64::new(0),
            pending: Mutex::new(Pending::default()),
            live_end: AtomicU64::new(0),
            last_write_ns: AtomicU64::new(0),
            ino: AtomicU64::new(0),
            quick: Mutex::new(None),
        }
    }

    pub(super) fn loc(&self) -> Loc {
        self.loc.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn dir(&self) -> PathBuf {
        self.loc().dir
    }

    pub(super) fn set_loc(&self, rel: PathBuf, dir: PathBuf) {
        *self.loc.write().unwrap_or_else(|p| p.into_inner()) = Loc { rel, dir };
    }
}

/// An open file handle.
pub(super) struct Handle {
    pub(super) file: Arc<FileState>,
    /// The opener, and its writer when opened for writing (the fast path of writes).
    pub(super) opener: u32,
    pub(super) opener_writing: Option<Arc<Mutex<Writing>>>,
    /// Processes whose writers this handle keeps open.
    pub(super) pids: Mutex<Vec<u32>>,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) writers: AtomicU64,
    pub(super) flushed_at_unmount: AtomicU64,
    pub(super) writes: AtomicU64,
    pub(super) written_bytes: AtomicU64,
    pub(super) reads: AtomicU64,
    pub(super) read_bytes: AtomicU64,
    pub(super) reader_builds: AtomicU64,
    pub(super) reader_merges: AtomicU64,
    pub(super) truncations: AtomicU64,
    pub(super) failures: AtomicU64,
}

/// Everything the serving threads share; kept by [`run`] to close the writers left
/// open when the mount ends.
pub(super) struct Shared {
    pub(super) root: PathBuf,
    pub(super) mode: IndexMode,
    pub(super) ttl: Duration,
    pub(super) as_root: bool,
    pub(super) inodes: Mutex<Inodes>,
    /// Open (or being changed) files by path in the mount.
    pub(super) files: Mutex<HashMap<PathBuf, Arc<FileState>>>,
    /// Unlinked files with handles still open.
    pub(super) orphans: Mutex<Vec<Arc<FileState>>>,
    pub(super) handles: Handles<Handle>,
    pub(super) dirs: Listings,
    pub(super) next_fh: AtomicU64,
    pub(super) unlinked_seq: AtomicU64,
    /// Thread id (what FUSE reports) → process id.
    pub(super) processes: Mutex<HashMap<u32, u32>>,
    pub(super) written_files: Mutex<HashSet<PathBuf>>,
    pub(super) first_failure: Mutex<Option<String>>,
    pub(super) counters: Counters,
    pub(super) finished: AtomicBool,
    pub(super) compactor: Compactor,
    /// Files nobody has open any more, newest last (at most [`RESTING`]): a file
    /// opened again refreshes its reader instead of reading every index log anew.
    /// Renaming or unlinking through the mount forgets them.
    pub(super) resting: Mutex<Vec<Resting>>,
    /// Writers take over ended writers' logs whose data log is at most this many
    /// bytes: the compaction's small-log threshold.
    pub(super) reuse_limit: u64,
    /// The background compaction's thresholds (`None`: off); a truncation closes the
    /// writers whose data log passed what they let a file keep, so that compaction
    /// can reclaim it.
    pub(super) thresholds: Option<Thresholds>,
}

impl Shared {
    /// The state of a new mount of `root` creating containers in index mode `mode`.
    /// `compaction`: the background compaction's thresholds (`None`: off).
    pub(super) fn new(
        root: PathBuf,
        mode: IndexMode,
        compaction: Option<Thresholds>,
        reuse_limit: u64,
    ) -> Self {
        Shared {
            root,
            mode,
            ttl: Duration::from_secs(1),
            // SAFETY: geteuid has no preconditions and cannot fail.
            as_root: unsafe { libc::geteuid() } == 0,
            inodes: Mutex::new(Inodes::new()),
            files: Mutex::new(HashMap::new()),
            orphans: Mutex::new(Vec::new()),
            handles: Handles::new(),
            dirs: Listings::new(),
            next_fh: AtomicU64::new(1),
            unlinked_seq: AtomicU64::new(0),
            processes: Mutex::new(HashMap::new()),
            written_files: Mutex::new(HashSet::new()),
            first_failure: Mutex::new(None),
            counters: Counters::default(),
            finished: AtomicBool::new(false),
            compactor: Compactor::new(compaction),
            reuse_limit,
            thresholds: compaction,
            resting: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn full(&self, rel: &Path) -> PathBuf {
        fusekit::under_root(&self.root, rel)
    }

    pub(super) fn path(&self, ino: INodeNo) -> R<PathBuf> {
        lock(&self.inodes).path(ino.0)
    }

    /// The path of `name` in directory `parent`; hidden backend names do not exist.
    pub(super) fn child(&self, parent: INodeNo, name: &OsStr) -> R<PathBuf> {
        let dir = self.path(parent)?;
        if dir.as_os_str().is_empty() && name.as_bytes().starts_with(UNLINKED_PREFIX.as_bytes()) {
            return Err(enoent());
        }
        Ok(fusekit::child_path(dir, name))
    }

    pub(super) fn handle(&self, fh: FileHandle) -> R<Arc<Handle>> {
        self.handles.get(fh.0)
    }

    /// The process of the request's thread.
    pub(super) fn pid_of(&self, req: &Request) -> u32 {
        let tid = req.pid();
        if let Some(&pid) = lock(&self.processes).get(&tid) {
            return pid;
        }
        let pid = process_of(tid);
        lock(&self.processes).insert(tid, pid);
        pid
    }

    /// Counts a failed container operation and turns it into the errno to answer.
    pub(super) fn fail(&self, e: &ContainerError) -> Errno {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        log::warn!("container operation failed: {e}");
        let mut first = lock(&self.first_failure);
        if first.is_none() {
            *first = Some(e.to_string());
        }
        Errno::from_i32(e.errno())
    }

    pub(super) fn live(&self) -> R<()> {
        if self.finished.load(Ordering::Acquire) {
            Err(errno_of(libc::EIO))
        } else {
            Ok(())
        }
    }

    /// The state of the file at `rel`, created (unopened) if none is kept.
    pub(super) fn state(
        files: &mut HashMap<PathBuf, Arc<FileState>>,
        root: &Path,
        rel: &Path,
    ) -> Arc<FileState> {
        files
            .entry(rel.to_path_buf())
            .or_insert_with(|| Arc::new(FileState::new(rel.to_path_buf(), root.join(rel))))
            .clone()
    }

    /// The backend path of inode `ino` (or of handle `fh`) and its open state, if any.
    /// Requests without a handle (`fstat`, `fchmod`) on an unlinked file still open
    /// find it by inode number among the orphans.
    pub(super) fn resolve(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
    ) -> R<(PathBuf, Option<Arc<FileState>>)> {
        if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
            return Ok((h.file.dir(), Some(h.file.clone())));
        }
        match self.path(ino) {
            Ok(rel) => Ok((self.full(&rel), self.kept(&rel))),
            Err(e) => lock(&self.orphans)
                .iter()
                .find(|f| f.ino.load(Ordering::Acquire) == ino.0)
                .map(|f| (f.dir(), Some(f.clone())))
                .ok_or(e),
        }
    }

    pub(super) fn kept(&self, rel: &Path) -> Option<Arc<FileState>> {
        lock(&self.files).get(rel).cloned()
    }

    /// Keeps what `f`, which nobody has open any more, knows for its next open.
    pub(super) fn rest(&self, f: &FileState, inner: &FileInner) {
        let dir = f.dir();
        let mut resting = lock(&self.resting);
        resting.retain(|r| r.dir != dir);
        if resting.len() >= RESTING {
            resting.remove(0);
        }
        // The writes through the mount since the stat was read are in `live_end`,
        // which the next open's state starts without.
        let quick = lock(&f.quick).map(|(at, mut q)| {
            q.size = q.size.max(f.live_end.load(Ordering::Acquire));
            q.mtime_ns = q.mtime_ns.max(f.last_write_ns.load(Ordering::Acquire));
            (at, q)
        });
        resting.push(Resting {
            dir,
            reader: inner.reader.as_ref().map(|(_, r)| r.clone()),
            quick,
        });
    }

    /// Gives `f`, just opened, what it kept when it was last closed (its reader to be
    /// refreshed before use).
    pub(super) fn wake(&self, f: &FileState, inner: &mut FileInner) {
        let dir = f.dir();
        let mut resting = lock(&self.resting);
        let Some(i) = resting.iter().position(|r| r.dir == dir) else {
            return;
        };
        let r = resting.remove(i);
        if inner.reader.is_none() {
            // A generation no build has: the next read refreshes it.
            inner.reader = r.reader.map(|reader| (u64::MAX, reader));
        }
        let mut quick = lock(&f.quick);
        if quick.is_none() {
            *quick = r.quick;
        }
    }

    /// Forgets what files at or below backend directory `dir` kept at rest (renamed
    /// or unlinked through the mount).
    pub(super) fn forget_resting(&self, dir: &Path) {
        lock(&self.resting).retain(|r| !r.dir.starts_with(dir));
    }
}
