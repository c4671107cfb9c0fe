//! The container mount (`patio mount container`): a FUSE file system whose regular
//! files are patio containers (patio-container) in a backend directory, so that
//! unmodified programs write N-1 files as per-process logs with a pattern index.
//!
//! * **Namespace.** Directories of the backend are directories of the mount (`mkdir`,
//!   `rmdir`, `readdir` pass through); a backend directory holding a container marker
//!   appears as a regular file. Other backend entries (plain files, links) are not
//!   shown. Files created through the mount are new containers with the mount's index
//!   mode (`pattern` or `raw`).
//! * **Writers.** Each (file, writing process) pair gets its own [`Writer`], so every
//!   process appends to its own data and index log and never waits on another. The
//!   process is the FUSE request's (threads count under their process). A writer is
//!   opened at the process's first write and stays open across that process's opens
//!   and closes of the file until the last handle it wrote through is released; then
//!   it is closed (flushed). A process that writes through a handle it inherited
//!   (fork) gets a writer of its own, tied to that handle.
//! * **Durability.** `close(2)` (FUSE flush) flushes the closing process's writer,
//!   `fsync(2)` every writer of the file; both make the data durable and visible to
//!   every reader. A clean unmount (SIGINT/SIGTERM, `fusermount3 -u`, or a lazy
//!   detach while files are still open) closes every writer still open.
//! * **Reads** go through one cached [`Reader`] per file. Before each read, writers of
//!   that file with unpublished writes publish them (an index record without an index
//!   fsync), and the reader is rebuilt when anything was published, flushed, closed or
//!   truncated since it was built: a process reads its own writes and every write any
//!   process finished before the read began. Changes made in the backend behind the
//!   mount's back are seen after the next change made through the mount.
//! * **Ordering.** Overlapping writes of different processes are ordered by the
//!   writers' index records (flush or publish times), as in the container: a write is
//!   ordered after another process's write when that process closed, fsynced or
//!   someone read the file in between. Programs that write disjoint blocks (N-1
//!   checkpoints) never depend on it.
//! * **Attributes.** The size is the larger of the container's size (`tools::stat`,
//!   from the writers' meta files) and the end of every write made through the mount
//!   since the last truncation, so it is right while files are being written; the
//!   modification time is the newest of the container's, the last write's and the
//!   directory's. Mode, owner and group are the container directory's: `chmod` and
//!   `chown` change the directory, and the kernel enforces them
//!   (`default_permissions`). When the daemon is not root, container directories keep
//!   owner `rwx` so the daemon can reach its logs, and the file shows those bits.
//! * **Truncation** (`truncate`, `ftruncate`, `open(O_TRUNC)`) closes every writer of
//!   the file, then appends a truncation record; later writes open new writers (so
//!   the container's size stays computable from its meta files alone).
//! * **Unlink and rename.** Unlink removes the container; while handles are still
//!   open it is first renamed to a hidden `.patio-unlinked.*` directory in the backend
//!   root, which goes when the last handle is released (or at unmount). Rename closes
//!   the writers of everything it moves and renames the backend directory (a target
//!   container is unlinked first). Hard and symbolic links are refused (`EPERM`).
//! * **Direct I/O.** Files are opened `FOPEN_DIRECT_IO` with parallel direct writes:
//!   every application read and write reaches the daemon with its own offset and size
//!   (split above the kernel's 1 MiB per-request limit), never as page-cache chunks.

use crate::passthrough::{check, errno, lock, system_time, timespec, Inodes, ROOT};
use crate::session::{self, Ended, MountConfig};
use crate::tracing::process_of;
use crate::{shown, FsError, Result};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
pub use patio_container::IndexMode;
use patio_container::{layout, tools, ContainerError, Reader, Writer};
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, DirEntryExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of the hidden backend directories that hold unlinked containers still open.
pub const UNLINKED_PREFIX: &str = ".patio-unlinked.";

type R<T> = std::result::Result<T, Errno>;

fn sys<T>(r: io::Result<T>) -> R<T> {
    r.map_err(|e| errno(&e))
}

fn enoent() -> Errno {
    Errno::from_i32(libc::ENOENT)
}

fn now_ns() -> u64 {
    layout::now_ns()
}

fn time_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn from_ns(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// What `patio mount container` asked for.
#[derive(Clone, Debug)]
pub struct ContainerMount {
    pub backend: PathBuf,
    pub mountpoint: PathBuf,
    /// Index mode of the containers created through the mount.
    pub index: IndexMode,
    pub allow_other: bool,
    /// `-o` mount options (comma-separated lists allowed).
    pub options: Vec<String>,
}

/// What the mount did, reported when it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSummary {
    pub ended: Ended,
    /// Containers written through the mount.
    pub files: u64,
    /// Writers opened (one per file and writing process, again after a truncation).
    pub writers: u64,
    /// Writers still open when the mount ended, closed (flushed) then.
    pub flushed_at_unmount: u64,
    pub writes: u64,
    pub written_bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    /// Readers (global indexes) built to serve reads.
    pub reader_builds: u64,
    pub truncations: u64,
    /// Container operations that failed (the application got an error, or a close at
    /// release could not report one), and the first such message.
    pub failures: u64,
    pub first_failure: Option<String>,
}

/// The mount options of `-o`: `(options, allow_other)`; unknown ones are refused.
pub fn parse_options(list: &[String]) -> Result<(Vec<MountOption>, bool)> {
    let mut out = Vec::new();
    let mut allow_other = false;
    for opt in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let o = match opt {
            "" | "default_permissions" | "rw" => continue,
            "allow_other" => {
                allow_other = true;
                continue;
            }
            "ro" => MountOption::RO,
            "noatime" => MountOption::NoAtime,
            "atime" => MountOption::Atime,
            "nodev" => MountOption::NoDev,
            "dev" => MountOption::Dev,
            "nosuid" => MountOption::NoSuid,
            "suid" => MountOption::Suid,
            "noexec" => MountOption::NoExec,
            "exec" => MountOption::Exec,
            "sync" => MountOption::Sync,
            "async" => MountOption::Async,
            "dirsync" => MountOption::DirSync,
            _ => match opt.strip_prefix("fsname=") {
                Some(name) if !name.is_empty() => MountOption::FSName(name.to_string()),
                _ => {
                    return Err(FsError::Invalid(format!(
                        "-o {opt}: unsupported mount option (supported: ro, rw, noatime, \
                         atime, nodev, dev, nosuid, suid, noexec, exec, sync, async, \
                         dirsync, allow_other, default_permissions, fsname=NAME)"
                    )))
                }
            },
        };
        out.push(o);
    }
    Ok((out, allow_other))
}

// ---- per-file state ------------------------------------------------------------

/// One process's writer of one file.
#[derive(Default)]
struct Writing {
    /// Opened at the process's first write; `None` before it and after a truncation.
    writer: Option<Writer>,
    /// Open handles this process has written through or opened for writing.
    handles: usize,
    /// Written since the last publish (readers do not see it yet).
    dirty: bool,
    /// Written since the last flush (not durable yet).
    unsynced: bool,
}

struct FileInner {
    /// Writing process → its writer.
    procs: HashMap<u32, Arc<Mutex<Writing>>>,
    /// Open handles of the file.
    handles: usize,
    /// Bumped whenever an index record or truncation is written.
    generation: u64,
    reader: Option<(u64, Arc<Reader>)>,
    /// Unlinked while open: the container lives on under a hidden name.
    unlinked: bool,
}

/// Where a file is: its path in the mount and its backend directory.
#[derive(Clone)]
struct Loc {
    rel: PathBuf,
    dir: PathBuf,
}

/// A file that is open (or being changed) through the mount.
struct FileState {
    loc: RwLock<Loc>,
    inner: Mutex<FileInner>,
    /// Writes since the last publish check (a hint: readers publish when non-zero).
    unpublished: AtomicU64,
    /// End of the furthest write through the mount since the last truncation.
    live_end: AtomicU64,
    last_write_ns: AtomicU64,
    /// The mount's inode number of the file (set when opened): how `fstat` of an
    /// unlinked file still finds it.
    ino: AtomicU64,
}

impl FileState {
    fn new(rel: PathBuf, dir: PathBuf) -> Self {
        FileState {
            loc: RwLock::new(Loc { rel, dir }),
            inner: Mutex::new(FileInner {
                procs: HashMap::new(),
                handles: 0,
                generation: 0,
                reader: None,
                unlinked: false,
            }),
            unpublished: AtomicU64::new(0),
            live_end: AtomicU64::new(0),
            last_write_ns: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    fn loc(&self) -> Loc {
        self.loc.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn dir(&self) -> PathBuf {
        self.loc().dir
    }

    fn set_loc(&self, rel: PathBuf, dir: PathBuf) {
        *self.loc.write().unwrap_or_else(|p| p.into_inner()) = Loc { rel, dir };
    }
}

/// An open file handle.
struct Handle {
    file: Arc<FileState>,
    /// The opener, and its writer when opened for writing (the fast path of writes).
    opener: u32,
    opener_writing: Option<Arc<Mutex<Writing>>>,
    /// Processes whose writers this handle keeps open.
    pids: Mutex<Vec<u32>>,
}

struct DirItem {
    ino: u64,
    kind: FileType,
    name: OsString,
}

#[derive(Default)]
struct Counters {
    writers: AtomicU64,
    flushed_at_unmount: AtomicU64,
    writes: AtomicU64,
    written_bytes: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    reader_builds: AtomicU64,
    truncations: AtomicU64,
    failures: AtomicU64,
}

/// Everything the serving threads share; kept by [`run`] to close the writers left
/// open when the mount ends.
struct Shared {
    root: PathBuf,
    mode: IndexMode,
    ttl: Duration,
    as_root: bool,
    inodes: Mutex<Inodes>,
    /// Open (or being changed) files by path in the mount.
    files: Mutex<HashMap<PathBuf, Arc<FileState>>>,
    /// Unlinked files with handles still open.
    orphans: Mutex<Vec<Arc<FileState>>>,
    handles: RwLock<HashMap<u64, Arc<Handle>>>,
    dirs: Mutex<HashMap<u64, Arc<Vec<DirItem>>>>,
    next_fh: AtomicU64,
    unlinked_seq: AtomicU64,
    /// Thread id (what FUSE reports) → process id.
    processes: Mutex<HashMap<u32, u32>>,
    written_files: Mutex<HashSet<PathBuf>>,
    first_failure: Mutex<Option<String>>,
    counters: Counters,
    finished: AtomicBool,
}

/// The container file system; serve it with [`session::serve`] (or use [`run`]).
pub struct ContainerFs {
    shared: Arc<Shared>,
}

impl ContainerFs {
    /// A mount of `backend` (an existing directory, absolute) creating containers in
    /// index mode `mode`.
    pub fn new(backend: PathBuf, mode: IndexMode) -> Self {
        ContainerFs {
            shared: Arc::new(Shared {
                root: backend,
                mode,
                ttl: Duration::from_secs(1),
                // SAFETY: geteuid has no preconditions and cannot fail.
                as_root: unsafe { libc::geteuid() } == 0,
                inodes: Mutex::new(Inodes::new()),
                files: Mutex::new(HashMap::new()),
                orphans: Mutex::new(Vec::new()),
                handles: RwLock::new(HashMap::new()),
                dirs: Mutex::new(HashMap::new()),
                next_fh: AtomicU64::new(1),
                unlinked_seq: AtomicU64::new(0),
                processes: Mutex::new(HashMap::new()),
                written_files: Mutex::new(HashSet::new()),
                first_failure: Mutex::new(None),
                counters: Counters::default(),
                finished: AtomicBool::new(false),
            }),
        }
    }
}

impl Shared {
    fn full(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn path(&self, ino: INodeNo) -> R<PathBuf> {
        lock(&self.inodes).path(ino.0)
    }

    /// The path of `name` in directory `parent`; hidden backend names do not exist.
    fn child(&self, parent: INodeNo, name: &OsStr) -> R<PathBuf> {
        let dir = self.path(parent)?;
        if dir.as_os_str().is_empty() && name.as_bytes().starts_with(UNLINKED_PREFIX.as_bytes()) {
            return Err(enoent());
        }
        Ok(match name.as_bytes() {
            b"." => dir,
            b".." => dir.parent().map(Path::to_path_buf).unwrap_or_default(),
            _ => dir.join(name),
        })
    }

    fn handle(&self, fh: FileHandle) -> R<Arc<Handle>> {
        self.handles
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::from_i32(libc::EBADF))
    }

    /// The process of the request's thread.
    fn pid_of(&self, req: &Request) -> u32 {
        let tid = req.pid();
        if let Some(&pid) = lock(&self.processes).get(&tid) {
            return pid;
        }
        let pid = process_of(tid);
        lock(&self.processes).insert(tid, pid);
        pid
    }

    /// Counts a failed container operation and turns it into the errno to answer.
    fn fail(&self, e: &ContainerError) -> Errno {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        let mut first = lock(&self.first_failure);
        if first.is_none() {
            *first = Some(e.to_string());
        }
        Errno::from_i32(e.errno())
    }

    fn live(&self) -> R<()> {
        if self.finished.load(Ordering::Acquire) {
            Err(Errno::from_i32(libc::EIO))
        } else {
            Ok(())
        }
    }

    /// The state of the file at `rel`, created (unopened) if none is kept.
    fn state(
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
    fn resolve(
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

    fn kept(&self, rel: &Path) -> Option<Arc<FileState>> {
        lock(&self.files).get(rel).cloned()
    }

    // ---- attributes ----

    fn dir_attr(ino: u64, m: &Metadata) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: m.size(),
            blocks: m.blocks(),
            atime: system_time(m.atime(), m.atime_nsec()),
            mtime: system_time(m.mtime(), m.mtime_nsec()),
            ctime: system_time(m.ctime(), m.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: FileType::Directory,
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: 0,
            blksize: m.blksize() as u32,
            flags: 0,
        }
    }

    /// Attributes of the container at `dir` (`state`: its open state, if any).
    fn file_attr(
        &self,
        ino: u64,
        dir: &Path,
        m: &Metadata,
        state: Option<&FileState>,
    ) -> R<FileAttr> {
        let quick = tools::stat(dir).map_err(|e| self.fail(&e))?;
        let (live_end, last_write) = state.map_or((0, 0), |s| {
            (
                s.live_end.load(Ordering::Acquire),
                s.last_write_ns.load(Ordering::Acquire),
            )
        });
        let size = quick.size.max(live_end);
        let dir_mtime = m.modified().map_or(0, time_ns);
        let mtime = quick.mtime_ns.max(last_write).max(dir_mtime);
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            // What the logs occupy, as `du` expects (not size/512: a file with holes
            // would report exabytes).
            blocks: quick.disk_bytes.div_ceil(512),
            atime: system_time(m.atime(), m.atime_nsec()),
            mtime: from_ns(mtime),
            ctime: system_time(m.ctime(), m.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm: (m.mode() & 0o7777) as u16,
            nlink: 1,
            uid: m.uid(),
            gid: m.gid(),
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Attributes of whatever is at backend path `full`: a directory or a container.
    fn attr_at(&self, ino: u64, full: &Path, state: Option<&FileState>) -> R<FileAttr> {
        let m = sys(fs::symlink_metadata(full))?;
        if !m.is_dir() {
            return Err(enoent());
        }
        if layout::is_container(full) {
            let kept;
            let state = match state {
                Some(s) => Some(s),
                None => {
                    let rel = full.strip_prefix(&self.root).unwrap_or(full);
                    kept = self.kept(rel);
                    kept.as_deref()
                }
            };
            self.file_attr(ino, full, &m, state)
        } else {
            Ok(Self::dir_attr(ino, &m))
        }
    }

    fn entry_of(&self, rel: PathBuf) -> R<FileAttr> {
        let full = self.full(&rel);
        let meta = sys(fs::symlink_metadata(&full))?;
        if !meta.is_dir() {
            return Err(enoent());
        }
        let ino = lock(&self.inodes).remember(rel);
        let a = self.attr_at(ino, &full, None);
        if a.is_err() {
            lock(&self.inodes).forget(ino, 1);
        }
        a
    }

    /// Owner and mode of a new entry made by `req`: the caller's uid and gid when the
    /// daemon is root (the directory's gid when it is setgid), then the mode asked
    /// for (containers keep owner `rwx` when the daemon is not root).
    fn settle(&self, req: &Request, full: &Path, perm: u32, container: bool) -> R<()> {
        if self.as_root {
            let setgid_dir = full
                .parent()
                .and_then(|d| fs::metadata(d).ok())
                .is_some_and(|m| m.mode() & libc::S_ISGID != 0);
            let gid = (!setgid_dir).then(|| req.gid());
            sys(std::os::unix::fs::lchown(full, Some(req.uid()), gid))?;
        }
        sys(fs::set_permissions(
            full,
            fs::Permissions::from_mode(self.dir_mode(perm, container)),
        ))
    }

    fn dir_mode(&self, perm: u32, container: bool) -> u32 {
        if container && !self.as_root {
            perm | 0o700
        } else {
            perm
        }
    }

    // ---- writers ----

    /// Closes the writer of `w` (if open): flushes and releases it.
    fn close_writer(&self, w: &mut Writing) -> R<bool> {
        w.dirty = false;
        w.unsynced = false;
        match w.writer.take() {
            Some(writer) => writer.close().map(|_| true).map_err(|e| self.fail(&e)),
            None => Ok(false),
        }
    }

    /// The writing state of process `pid` for handle `h`, attaching the process to the
    /// handle the first time it writes through it.
    fn writing_for(&self, h: &Handle, pid: u32) -> Arc<Mutex<Writing>> {
        if pid == h.opener {
            if let Some(w) = &h.opener_writing {
                return w.clone();
            }
        }
        let mut inner = lock(&h.file.inner);
        let mut pids = lock(&h.pids);
        let w = inner.procs.entry(pid).or_default().clone();
        if !pids.contains(&pid) {
            pids.push(pid);
            lock(&w).handles += 1;
        }
        w
    }

    fn write(&self, req: &Request, fh: FileHandle, offset: u64, data: &[u8]) -> R<usize> {
        let h = self.handle(fh)?;
        let pid = self.pid_of(req);
        let w = self.writing_for(&h, pid);
        let mut g = lock(&w);
        self.live()?;
        if g.writer.is_none() {
            let dir = h.file.dir();
            let writer = Writer::open(&dir).map_err(|e| self.fail(&e))?;
            self.counters.writers.fetch_add(1, Ordering::Relaxed);
            lock(&self.written_files).insert(dir);
            g.writer = Some(writer);
        }
        let writer = g.writer.as_mut().expect("opened above");
        writer.write_at(offset, data).map_err(|e| self.fail(&e))?;
        g.dirty = true;
        g.unsynced = true;
        // Under the writer's lock: a truncation (which takes every writer's lock)
        // sees this write either entirely before or entirely after it.
        let f = &h.file;
        f.live_end
            .fetch_max(offset + data.len() as u64, Ordering::AcqRel);
        f.last_write_ns.store(now_ns(), Ordering::Release);
        f.unpublished.fetch_add(1, Ordering::AcqRel);
        drop(g);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(data.len())
    }

    /// Publishes the unpublished writes of every writer of `f`.
    fn publish_pending(&self, f: &FileState) -> R<()> {
        if f.unpublished.swap(0, Ordering::AcqRel) == 0 {
            return Ok(());
        }
        let mut inner = lock(&f.inner);
        let procs: Vec<_> = inner.procs.values().cloned().collect();
        let mut any = false;
        for w in procs {
            let mut g = lock(&w);
            if g.dirty {
                if let Some(writer) = g.writer.as_mut() {
                    writer.publish().map_err(|e| self.fail(&e))?;
                }
                g.dirty = false;
                any = true;
            }
        }
        if any {
            inner.generation += 1;
        }
        Ok(())
    }

    /// The file's reader, rebuilt when the index changed since it was built.
    fn reader_of(&self, f: &FileState) -> R<Arc<Reader>> {
        let mut inner = lock(&f.inner);
        if let Some((generation, r)) = &inner.reader {
            if *generation == inner.generation {
                return Ok(r.clone());
            }
        }
        let r = Arc::new(Reader::open(&f.dir()).map_err(|e| self.fail(&e))?);
        self.counters.reader_builds.fetch_add(1, Ordering::Relaxed);
        // A reader that met a damaged (perhaps half-written) record is not kept.
        inner.reader = r.damage().is_empty().then(|| (inner.generation, r.clone()));
        Ok(r)
    }

    fn read(&self, fh: FileHandle, offset: u64, size: u32) -> R<Vec<u8>> {
        let h = self.handle(fh)?;
        self.live()?;
        self.publish_pending(&h.file)?;
        let reader = self.reader_of(&h.file)?;
        let mut buf = vec![0u8; size as usize];
        let n = reader
            .read_at(&mut buf, offset)
            .map_err(|e| self.fail(&e))?;
        buf.truncate(n);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .read_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(buf)
    }

    /// Flushes the writers of `f`: of process `pid` only, or all of them.
    fn flush_writers(&self, f: &FileState, pid: Option<u32>) -> R<()> {
        let mut inner = lock(&f.inner);
        let procs: Vec<_> = match pid {
            Some(p) => inner.procs.get(&p).cloned().into_iter().collect(),
            None => inner.procs.values().cloned().collect(),
        };
        let mut any = false;
        for w in procs {
            let mut g = lock(&w);
            if !g.unsynced {
                continue;
            }
            if let Some(writer) = g.writer.as_mut() {
                writer.flush().map_err(|e| self.fail(&e))?;
            }
            g.unsynced = false;
            g.dirty = false;
            any = true;
        }
        if any {
            inner.generation += 1;
        }
        Ok(())
    }

    /// Truncates (or extends) file `f` to `size`: closes its writers, then records
    /// the truncation.
    fn truncate(&self, f: &FileState, size: u64) -> R<()> {
        let mut inner = lock(&f.inner);
        let procs: Vec<_> = inner.procs.values().cloned().collect();
        let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
        for g in guards.iter_mut() {
            self.close_writer(g)?;
        }
        let dir = f.dir();
        // Truncating to the size the file has (open(O_TRUNC) of an empty file) would
        // only add a record.
        if tools::stat(&dir).map_err(|e| self.fail(&e))?.size != size {
            tools::truncate(&dir, size).map_err(|e| self.fail(&e))?;
            self.counters.truncations.fetch_add(1, Ordering::Relaxed);
        }
        f.live_end.store(0, Ordering::Release);
        f.last_write_ns.store(now_ns(), Ordering::Release);
        inner.generation += 1;
        inner.reader = None;
        Ok(())
    }

    // ---- open and release ----

    /// Opens the container at `rel` (already there) for `req` with open `flags`.
    fn open_file(&self, req: &Request, ino: u64, rel: &Path, flags: i32) -> R<u64> {
        self.live()?;
        let pid = self.pid_of(req);
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let file = {
            let mut files = lock(&self.files);
            let file = Self::state(&mut files, &self.root, rel);
            lock(&file.inner).handles += 1;
            file.ino.store(ino, Ordering::Release);
            file
        };
        let opener_writing = writable.then(|| {
            let w = lock(&file.inner).procs.entry(pid).or_default().clone();
            lock(&w).handles += 1;
            w
        });
        let handle = Handle {
            file: file.clone(),
            opener: pid,
            pids: Mutex::new(if writable { vec![pid] } else { vec![] }),
            opener_writing,
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, Arc::new(handle));
        if writable && flags & libc::O_TRUNC != 0 {
            if let Err(e) = self.truncate(&file, 0) {
                self.release(FileHandle(fh));
                return Err(e);
            }
        }
        Ok(fh)
    }

    fn release(&self, fh: FileHandle) {
        let Some(h) = self
            .handles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0)
        else {
            return;
        };
        let f = &h.file;
        let last = {
            let mut inner = lock(&f.inner);
            inner.handles = inner.handles.saturating_sub(1);
            let mut closed = false;
            for pid in lock(&h.pids).iter() {
                let Some(w) = inner.procs.get(pid).cloned() else {
                    continue;
                };
                let mut g = lock(&w);
                g.handles = g.handles.saturating_sub(1);
                if g.handles == 0 {
                    inner.procs.remove(pid);
                    // An error here cannot reach the application (close has returned);
                    // it is counted and reported when the mount ends.
                    closed |= self.close_writer(&mut g).unwrap_or(true);
                }
            }
            if closed {
                inner.generation += 1;
            }
            inner.handles == 0
        };
        if !last {
            return;
        }
        let mut files = lock(&self.files);
        let inner = lock(&f.inner);
        if inner.handles > 0 {
            return;
        }
        if inner.unlinked {
            lock(&self.orphans).retain(|o| !Arc::ptr_eq(o, f));
            if let Err(e) = tools::remove(&f.dir()) {
                self.fail(&e);
            }
        } else {
            let rel = f.loc().rel;
            if files.get(&rel).is_some_and(|kept| Arc::ptr_eq(kept, f)) {
                files.remove(&rel);
            }
        }
    }

    // ---- namespace ----

    /// Creates a container at `rel` for `req` with permission bits `perm`.
    fn create_container(&self, req: &Request, rel: &Path, perm: u32) -> R<()> {
        let full = self.full(rel);
        match fs::symlink_metadata(&full) {
            Ok(_) => return Err(Errno::from_i32(libc::EEXIST)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(errno(&e)),
        }
        layout::create(&full, self.mode).map_err(|e| self.fail(&e))?;
        self.settle(req, &full, perm, true)
    }

    /// Removes the container at `rel` (closing its writers); one still open lives on
    /// under a hidden name until its last handle is released.
    fn unlink_container(&self, rel: &Path) -> R<()> {
        let full = self.full(rel);
        let mut files = lock(&self.files);
        if let Some(f) = files.remove(rel) {
            let mut inner = lock(&f.inner);
            if inner.handles > 0 {
                let procs: Vec<_> = inner.procs.values().cloned().collect();
                let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
                for g in guards.iter_mut() {
                    self.close_writer(g)?;
                }
                let seq = self.unlinked_seq.fetch_add(1, Ordering::Relaxed);
                let hidden = self
                    .root
                    .join(format!("{UNLINKED_PREFIX}{}.{seq}", std::process::id()));
                if let Err(e) = fs::rename(&full, &hidden) {
                    files.insert(rel.to_path_buf(), f.clone());
                    return Err(errno(&e));
                }
                f.set_loc(rel.to_path_buf(), hidden);
                inner.unlinked = true;
                inner.generation += 1;
                lock(&self.orphans).push(f.clone());
                drop(guards);
                drop(inner);
                lock(&self.inodes).detach(rel);
                return Ok(());
            }
        }
        drop(files);
        tools::remove(&full).map_err(|e| self.fail(&e))?;
        lock(&self.inodes).detach(rel);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path, flags: RenameFlags) -> R<()> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return Err(Errno::from_i32(libc::EINVAL));
        }
        let (ff, ft) = (self.full(from), self.full(to));
        let from_meta = sys(fs::symlink_metadata(&ff))?;
        if !from_meta.is_dir() {
            return Err(enoent());
        }
        if from == to {
            return Ok(());
        }
        let from_container = layout::is_container(&ff);
        let target = fs::symlink_metadata(&ft).ok().filter(|m| m.is_dir());
        if target.is_some() {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::from_i32(libc::EEXIST));
            }
            match (from_container, layout::is_container(&ft)) {
                (true, true) => self.unlink_container(to)?,
                (true, false) => return Err(Errno::from_i32(libc::EISDIR)),
                (false, true) => return Err(Errno::from_i32(libc::ENOTDIR)),
                (false, false) => {}
            }
        }
        let mut files = lock(&self.files);
        let moving: Vec<(PathBuf, Arc<FileState>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        // Writers name their backend directory: close them before it moves; writes
        // that wait meanwhile open new writers at the new place.
        let inners: Vec<_> = moving.iter().map(|(_, f)| lock(&f.inner)).collect();
        let procs: Vec<_> = inners
            .iter()
            .flat_map(|i| i.procs.values().cloned())
            .collect();
        let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
        for g in guards.iter_mut() {
            self.close_writer(g)?;
        }
        sys(fs::rename(&ff, &ft))?;
        for (p, f) in &moving {
            let rest = p.strip_prefix(from).expect("selected by prefix");
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            files.remove(p);
            f.set_loc(new.clone(), self.full(&new));
            files.insert(new, f.clone());
        }
        drop(guards);
        drop(inners);
        drop(files);
        lock(&self.inodes).rename(from, to);
        Ok(())
    }

    fn setattr(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
        mode: Option<u32>,
        owner: (Option<u32>, Option<u32>),
        size: Option<u64>,
        times: [Option<TimeOrNow>; 2],
    ) -> R<FileAttr> {
        let (full, state) = self.resolve(ino, fh)?;
        let container = layout::is_container(&full);
        if let Some(mode) = mode {
            let perm = self.dir_mode(mode & 0o7777, container);
            sys(fs::set_permissions(&full, fs::Permissions::from_mode(perm)))?;
        }
        if owner.0.is_some() || owner.1.is_some() {
            sys(std::os::unix::fs::lchown(&full, owner.0, owner.1))?;
        }
        if let Some(size) = size {
            if !container {
                return Err(Errno::from_i32(libc::EISDIR));
            }
            self.live()?;
            match &state {
                Some(f) => self.truncate(f, size)?,
                // Not open: no writers to close.
                None => self.truncate(&FileState::new(PathBuf::new(), full.clone()), size)?,
            }
        }
        if times.iter().any(Option::is_some) {
            let ts = times.map(timespec);
            let p = CString::new(full.as_os_str().as_bytes())
                .map_err(|_| Errno::from_i32(libc::EINVAL))?;
            // SAFETY: valid NUL-terminated path and two timespecs.
            check(unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    ts.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })?;
        }
        self.attr_at(ino.0, &full, state.as_deref())
    }

    fn list(&self, ino: INodeNo) -> R<Vec<DirItem>> {
        let rel = self.path(ino)?;
        let full = self.full(&rel);
        if layout::is_container(&full) {
            return Err(Errno::from_i32(libc::ENOTDIR));
        }
        let mut items = vec![
            DirItem {
                ino: ino.0,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirItem {
                ino: ROOT,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        let top = rel.as_os_str().is_empty();
        for entry in sys(fs::read_dir(&full))? {
            let entry = sys(entry)?;
            let name = entry.file_name();
            if top && name.as_bytes().starts_with(UNLINKED_PREFIX.as_bytes()) {
                continue;
            }
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let kind = if layout::is_container(&entry.path()) {
                FileType::RegularFile
            } else {
                FileType::Directory
            };
            items.push(DirItem {
                ino: entry.ino(),
                kind,
                name,
            });
        }
        Ok(items)
    }

    /// Closes every writer still open and removes unlinked containers; the summary.
    fn finish(&self, ended: Ended) -> ContainerSummary {
        self.finished.store(true, Ordering::Release);
        let mut states: Vec<Arc<FileState>> = lock(&self.files).values().cloned().collect();
        states.extend(lock(&self.orphans).iter().cloned());
        for f in &states {
            let mut inner = lock(&f.inner);
            let procs: Vec<_> = inner.procs.values().cloned().collect();
            for w in procs {
                if let Ok(true) = self.close_writer(&mut lock(&w)) {
                    self.counters
                        .flushed_at_unmount
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            inner.generation += 1;
            if inner.unlinked {
                if let Err(e) = tools::remove(&f.dir()) {
                    self.fail(&e);
                }
            }
        }
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Acquire);
        ContainerSummary {
            ended,
            files: lock(&self.written_files).len() as u64,
            writers: get(&c.writers),
            flushed_at_unmount: get(&c.flushed_at_unmount),
            writes: get(&c.writes),
            written_bytes: get(&c.written_bytes),
            reads: get(&c.reads),
            read_bytes: get(&c.read_bytes),
            reader_builds: get(&c.reader_builds),
            truncations: get(&c.truncations),
            failures: get(&c.failures),
            first_failure: lock(&self.first_failure).clone(),
        }
    }
}

fn fopen_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

fn reply_empty(reply: ReplyEmpty, r: R<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for ContainerFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = &self.shared;
        match s.child(parent, name).and_then(|rel| s.entry_of(rel)) {
            Ok(a) => reply.entry(&s.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.shared.inodes).forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = &self.shared;
        let r = s
            .resolve(ino, fh)
            .and_then(|(full, f)| s.attr_at(ino.0, &full, f.as_deref()));
        match r {
            Ok(a) => reply.attr(&s.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = &self.shared;
        match s.setattr(ino, fh, mode, (uid, gid), size, [atime, mtime]) {
            Ok(a) => reply.attr(&s.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let s = &self.shared;
        let r = (|| {
            if mode & libc::S_IFMT != libc::S_IFREG {
                return Err(Errno::from_i32(libc::EPERM));
            }
            let rel = s.child(parent, name)?;
            s.create_container(req, &rel, mode & !umask & 0o7777)?;
            s.entry_of(rel)
        })();
        match r {
            Ok(a) => reply.entry(&s.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let s = &self.shared;
        let r = (|| {
            let rel = s.child(parent, name)?;
            let full = s.full(&rel);
            let perm = mode & !umask & 0o7777;
            sys(fs::DirBuilder::new().mode(perm).create(&full))?;
            s.settle(req, &full, perm, false)?;
            s.entry_of(rel)
        })();
        match r {
            Ok(a) => reply.entry(&s.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.child(parent, name).and_then(|rel| {
            let full = s.full(&rel);
            if !sys(fs::symlink_metadata(&full))?.is_dir() {
                return Err(enoent());
            }
            if !layout::is_container(&full) {
                return Err(Errno::from_i32(libc::EISDIR));
            }
            s.unlink_container(&rel)
        });
        reply_empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.child(parent, name).and_then(|rel| {
            let full = s.full(&rel);
            if layout::is_container(&full) {
                return Err(Errno::from_i32(libc::ENOTDIR));
            }
            sys(fs::remove_dir(&full))?;
            lock(&s.inodes).detach(&rel);
            Ok(())
        });
        reply_empty(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let r = (|| {
            let from = s.child(parent, name)?;
            let to = s.child(newparent, newname)?;
            s.rename(&from, &to, flags)
        })();
        reply_empty(reply, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        let r = s.path(ino).and_then(|rel| {
            let full = s.full(&rel);
            if !layout::is_container(&full) {
                return Err(if full.is_dir() {
                    Errno::from_i32(libc::EISDIR)
                } else {
                    enoent()
                });
            }
            s.open_file(req, ino.0, &rel, flags.0)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), fopen_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let s = &self.shared;
        let r = (|| {
            let mut flags = flags;
            let rel = s.child(parent, name)?;
            match s.create_container(req, &rel, mode & !umask & 0o7777) {
                // A new container is empty: O_TRUNC has nothing to do.
                Ok(()) => flags &= !libc::O_TRUNC,
                // Created meanwhile by someone else: open it, as open(2) would.
                Err(e) if e.code() == libc::EEXIST && flags & libc::O_EXCL == 0 => {
                    let full = s.full(&rel);
                    if !layout::is_container(&full) {
                        return Err(Errno::from_i32(libc::EISDIR));
                    }
                }
                Err(e) => return Err(e),
            }
            let a = s.entry_of(rel.clone())?;
            match s.open_file(req, a.ino.0, &rel, flags) {
                Ok(fh) => Ok((a, fh)),
                Err(e) => {
                    lock(&s.inodes).forget(a.ino.0, 1);
                    Err(e)
                }
            }
        })();
        match r {
            Ok((a, fh)) => reply.created(&s.ttl, &a, Generation(0), FileHandle(fh), fopen_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.shared.read(fh, offset, size) {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.shared.write(req, fh, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let pid = s.pid_of(req);
        let r = s
            .handle(fh)
            .and_then(|h| s.flush_writers(&h.file, Some(pid)));
        reply_empty(reply, r);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.shared.release(fh);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let r = s.handle(fh).and_then(|h| s.flush_writers(&h.file, None));
        reply_empty(reply, r);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        match s.list(ino) {
            Ok(items) => {
                let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
                lock(&s.dirs).insert(fh, Arc::new(items));
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(items) = lock(&self.shared.dirs).get(&fh.0).cloned() else {
            return reply.error(Errno::from_i32(libc::EBADF));
        };
        for (i, item) in items.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(item.ino), (i + 1) as u64, item.kind, &item.name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.shared.dirs).remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let r = s
            .path(ino)
            .and_then(|rel| sys(fs::File::open(s.full(&rel)).and_then(|d| d.sync_all())));
        reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let r = (|| {
            let p = CString::new(self.shared.root.as_os_str().as_bytes())
                .map_err(|_| Errno::from_i32(libc::EINVAL))?;
            // SAFETY: statvfs is plain old data; zeroed is a valid value.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: valid path, valid out-pointer.
            check(unsafe { libc::statvfs(p.as_ptr(), &mut st) })?;
            Ok(st)
        })();
        match r {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                st.f_namemax as u32,
                st.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }
}

/// The backend directory, absolute: an existing directory that is not itself a
/// container.
pub fn check_backend(p: &Path) -> Result<PathBuf> {
    let meta = fs::metadata(p).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => {
            FsError::Invalid(format!("backend directory {} does not exist", shown(p)))
        }
        _ => FsError::io(format!("backend directory {}", shown(p)), e),
    })?;
    if !meta.is_dir() {
        return Err(FsError::Invalid(format!(
            "backend {} is not a directory",
            shown(p)
        )));
    }
    if layout::is_container(p) {
        return Err(FsError::Invalid(format!(
            "backend {} is itself a patio container; mount the directory that holds it",
            shown(p)
        )));
    }
    fs::canonicalize(p).map_err(|e| FsError::io(format!("backend directory {}", shown(p)), e))
}

/// Mounts the container file system and serves it until the mount ends; then closes
/// every writer still open and returns what was done.
pub fn run(req: &ContainerMount, notify: &mut dyn FnMut(&str)) -> Result<ContainerSummary> {
    let (options, allow_other) = parse_options(&req.options)?;
    let backend = check_backend(&req.backend)?;
    let mountpoint = session::check_mountpoint(&req.mountpoint, &backend)?;
    session::check_fuse()?;
    let fs = ContainerFs::new(backend, req.index);
    let shared = fs.shared.clone();
    let cfg = MountConfig {
        allow_other: req.allow_other || allow_other,
        fsname: "patio-container".into(),
        options,
        ..MountConfig::default()
    };
    let ended = session::serve(fs, &mountpoint, &cfg, notify)?;
    Ok(shared.finish(ended))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_options_are_parsed_or_refused_with_a_reason() {
        let (opts, other) = parse_options(&["ro,noatime".into(), "allow_other".into()]).unwrap();
        assert_eq!(opts, vec![MountOption::RO, MountOption::NoAtime]);
        assert!(other);
        let (opts, other) = parse_options(&["fsname=ckpt,default_permissions".into()]).unwrap();
        assert_eq!(opts, vec![MountOption::FSName("ckpt".into())]);
        assert!(!other);
        let e = parse_options(&["direct_io".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-o direct_io") && e.contains("unsupported"),
            "{e}"
        );
    }

    #[test]
    fn bad_backends_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let msg = |p: &Path| check_backend(p).unwrap_err().to_string();
        let missing = dir.path().join("nope");
        assert!(msg(&missing).contains("does not exist"));
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        assert!(msg(&file).contains("not a directory"));
        let c = dir.path().join("c");
        layout::create(&c, IndexMode::Pattern).unwrap();
        assert!(msg(&c).contains("itself a patio container"));
        assert_eq!(
            check_backend(dir.path()).unwrap(),
            fs::canonicalize(dir.path()).unwrap()
        );
    }

    /// Drives the file system's state machine without the kernel: two processes
    /// write interleaved blocks, a read publishes them, a truncation closes writers.
    #[test]
    fn writers_per_process_publish_on_read_and_close_on_release() {
        let dir = tempfile::tempdir().unwrap();
        let fs = ContainerFs::new(dir.path().to_path_buf(), IndexMode::Pattern);
        let s = &fs.shared;
        let rel = PathBuf::from("f");
        layout::create(&s.full(&rel), IndexMode::Pattern).unwrap();
        // Two handles of two "processes" (bypassing Request: the handle's opener pid
        // is what writes use when the pid matches).
        let open = |pid: u32| {
            let file = Shared::state(&mut lock(&s.files), &s.root, &rel);
            lock(&file.inner).handles += 1;
            let w = lock(&file.inner).procs.entry(pid).or_default().clone();
            lock(&w).handles += 1;
            let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
            s.handles.write().unwrap().insert(
                fh,
                Arc::new(Handle {
                    file,
                    opener: pid,
                    opener_writing: Some(w),
                    pids: Mutex::new(vec![pid]),
                }),
            );
            FileHandle(fh)
        };
        let (a, b) = (open(100), open(200));
        let write = |fh: FileHandle, pid: u32, off: u64, byte: u8| {
            let h = s.handle(fh).unwrap();
            let w = s.writing_for(&h, pid);
            let mut g = lock(&w);
            if g.writer.is_none() {
                g.writer = Some(Writer::open(&h.file.dir()).unwrap());
            }
            g.writer
                .as_mut()
                .unwrap()
                .write_at(off, &[byte; 4096])
                .unwrap();
            g.dirty = true;
            g.unsynced = true;
            h.file.live_end.fetch_max(off + 4096, Ordering::AcqRel);
            h.file.unpublished.fetch_add(1, Ordering::AcqRel);
        };
        for i in 0..8u64 {
            write(a, 100, i * 8192, 1);
            write(b, 200, i * 8192 + 4096, 2);
        }
        let attr = s.attr_at(5, &s.full(&rel), None).unwrap();
        assert_eq!(
            attr.size, 65536,
            "live writers' ends count before any flush"
        );
        let got = s.read(a, 0, 65536).unwrap();
        assert_eq!(got.len(), 65536);
        for (i, chunk) in got.chunks(4096).enumerate() {
            assert!(chunk.iter().all(|&x| x == 1 + (i % 2) as u8), "block {i}");
        }
        assert_eq!(layout::list_writers(&s.full(&rel)).unwrap().len(), 2);
        // Truncation closes both writers; the size follows.
        let f = s.kept(&rel).unwrap();
        s.truncate(&f, 10_000).unwrap();
        assert_eq!(s.attr_at(5, &s.full(&rel), None).unwrap().size, 10_000);
        assert!(lock(&f.inner)
            .procs
            .values()
            .all(|w| lock(w).writer.is_none()));
        write(a, 100, 20_000, 3);
        assert_eq!(s.read(b, 16_384, 8192).unwrap().len(), 24_096 - 16_384);
        assert_eq!(s.read(b, 20_000, 10).unwrap(), vec![3u8; 10]);
        s.release(a);
        s.release(b);
        assert!(s.kept(&rel).is_none(), "the last release forgets the file");
        assert_eq!(tools::stat(&s.full(&rel)).unwrap().size, 24_096);
        assert_eq!(layout::list_writers(&s.full(&rel)).unwrap().len(), 3);
        let summary = s.finish(Ended::Unmounted);
        assert_eq!(summary.flushed_at_unmount, 0);
    }
}
