//! A passthrough filesystem over a source directory.
//!
//! Every request is forwarded to the file or directory of the same relative path under
//! the source: metadata with `lstat`/`chmod`/`lchown`/`truncate`/`utimensat`, directory
//! changes with `mkdir`/`rmdir`/`unlink`/`rename`, data with `pread`/`pwrite` on the
//! real descriptor opened with the application's flags. Errors carry the real `errno`
//! of the failed call, so the application sees what the source file system said.
//!
//! Semantics decided here:
//!
//! * **Direct I/O.** With [`Options::direct_io`] (the default) files are opened with
//!   `FOPEN_DIRECT_IO`: the kernel bypasses its page cache and sends each `read`/`write`
//!   of the application as one request with the application's offset and size (split
//!   only above the kernel's per-request maximum, 1 MiB on current kernels). In cached
//!   mode the daemon would see readahead and writeback chunks instead. Shared `mmap` is
//!   allowed where the kernel supports it (`FUSE_DIRECT_IO_ALLOW_MMAP`); such I/O goes
//!   through the page cache and arrives as page-sized requests.
//! * **Inodes.** Inode numbers are the mount's own, handed out per path on lookup and
//!   dropped when the kernel forgets them; renames move the numbers of the renamed entry
//!   and everything below it, unlink detaches the number from its path (open handles
//!   keep working on their descriptor).
//! * **Ownership.** A daemon running as root gives new files, directories, nodes and
//!   links the caller's uid and gid (the gid of the directory when it is setgid) and the
//!   caller's mode with its umask applied; permission checks are the kernel's
//!   (`default_permissions`) against the source's real owners and modes.
//! * **Observation.** Each served read and write is reported to an [`Observer`] with the
//!   path it was opened under, the caller's pid, the offset, the bytes actually
//!   transferred and when the daemon started and finished it. Failed requests are not
//!   reported; zero-byte reads (at end of file) are.
//! * **Serving reads.** An observer may serve the reads of a file itself: when a file
//!   is opened or created with read access, [`Observer::open_reader`] may return a
//!   [`FileReader`] that then answers every read of that file handle instead of
//!   `pread` (the prefetch mount); it is dropped when the handle is released. Every
//!   change of a file's bytes made through the mount — a write, a truncation, a
//!   `fallocate` — is reported to [`Observer::changed`] after it happened, with the
//!   identity of the real file, so that what such a reader keeps can be dropped.
//! * **Attributes** are cached by the kernel for [`Options::ttl`] (1 s by default):
//!   changes made directly in the source directory, bypassing the mount, can take that
//!   long to show through it.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use patio_core::trace::Op;
use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{
    DirBuilderExt, DirEntryExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt,
};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One read or write served by the mount.
#[derive(Debug)]
pub struct IoEvent<'a> {
    /// The file's path inside the mount (relative, `/`-separated), as it was opened.
    pub path: &'a Arc<str>,
    /// Process id of the caller, from the FUSE request.
    pub pid: u32,
    pub op: Op,
    pub offset: u64,
    /// Bytes actually transferred (may be less than asked at end of file).
    pub length: u64,
    /// When the daemon started serving the request, and when it was done.
    pub start: Instant,
    pub end: Instant,
}

/// The identity of a real file in the source: device and inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    fn of(m: &Metadata) -> Self {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// A change of a file's bytes made through the mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataChange {
    /// `[offset, offset + len)` was written (or zeroed, punched, shifted: `fallocate`
    /// reports everything from `offset` on).
    Written { offset: u64, len: u64 },
    /// The file was truncated or extended to `size` bytes.
    Resized { size: u64 },
}

/// Serves the reads of one open file handle in place of `pread` on the real file.
pub trait FileReader: Send + Sync {
    /// Fills `buf` with the bytes at `offset` of `file` (the real file, opened with the
    /// application's flags); fewer only at the end of the file. `pid` is the caller's
    /// (thread) id, from the FUSE request.
    fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], pid: u32) -> io::Result<usize>;
}

/// Sees every read and write the mount served, and may serve reads itself. Called on
/// the FUSE worker threads, before the reply is sent: keep it short.
pub trait Observer: Send + Sync + 'static {
    fn io(&self, event: &IoEvent<'_>);

    /// A file was opened or created with read access as `path`: a reader that serves
    /// the reads of this handle, or `None` for `pread` on `file`.
    fn open_reader(
        &self,
        _path: &Arc<str>,
        _id: FileId,
        _file: &File,
    ) -> Option<Box<dyn FileReader>> {
        None
    }

    /// The bytes of file `id` are about to change through the mount (a write, a
    /// truncation, an `fallocate`): called before the change, so that an observer can
    /// tell changes made outside the mount before it from the change itself.
    fn changing(&self, _id: FileId) {}

    /// The bytes of file `id` changed through the mount (reported after the change).
    fn changed(&self, _id: FileId, _change: DataChange) {}
}

/// Observes nothing: a plain passthrough mount.
pub struct NoObserver;

impl Observer for NoObserver {
    fn io(&self, _event: &IoEvent<'_>) {}
}

/// How the passthrough mount serves files.
#[derive(Clone, Debug)]
pub struct Options {
    /// Open files with `FOPEN_DIRECT_IO` (every application request reaches the daemon
    /// unchanged) rather than through the kernel's page cache.
    pub direct_io: bool,
    /// How long the kernel may cache entries and attributes.
    pub ttl: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            direct_io: true,
            ttl: Duration::from_secs(1),
        }
    }
}

type R<T> = std::result::Result<T, Errno>;

/// The `errno` of a failed call; errors without one map by kind, else to `EIO`.
pub fn errno(e: &io::Error) -> Errno {
    if let Some(code) = e.raw_os_error().filter(|&c| c > 0) {
        return Errno::from_i32(code);
    }
    use io::ErrorKind::*;
    Errno::from_i32(match e.kind() {
        NotFound => libc::ENOENT,
        PermissionDenied => libc::EACCES,
        AlreadyExists => libc::EEXIST,
        InvalidInput | InvalidData => libc::EINVAL,
        Interrupted => libc::EINTR,
        WouldBlock => libc::EAGAIN,
        Unsupported => libc::EOPNOTSUPP,
        _ => libc::EIO,
    })
}

fn sys<T>(r: io::Result<T>) -> R<T> {
    r.map_err(|e| errno(&e))
}

/// `-1` from a libc call → the thread's `errno`.
pub(crate) fn check(ret: libc::c_int) -> R<()> {
    if ret == -1 {
        Err(errno(&io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

pub(crate) fn c_path(p: &Path) -> R<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::from_i32(libc::EINVAL))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---- inode table ---------------------------------------------------------------

pub(crate) const ROOT: u64 = 1;

struct Node {
    /// Path relative to the source root; `None` once unlinked.
    path: Option<PathBuf>,
    /// Lookups the kernel holds (entries replied minus forgotten).
    lookups: u64,
}

/// Inode number ↔ relative path (shared with the container mount).
pub(crate) struct Inodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    pub(crate) fn new() -> Self {
        let mut t = Inodes {
            by_ino: HashMap::new(),
            by_path: HashMap::new(),
            next: ROOT + 1,
        };
        t.by_ino.insert(
            ROOT,
            Node {
                path: Some(PathBuf::new()),
                lookups: 1,
            },
        );
        t.by_path.insert(PathBuf::new(), ROOT);
        t
    }

    pub(crate) fn path(&self, ino: u64) -> R<PathBuf> {
        self.by_ino
            .get(&ino)
            .and_then(|n| n.path.clone())
            .ok_or(Errno::from_i32(libc::ENOENT))
    }

    /// The inode of `path`, allocated if new; counts one lookup.
    pub(crate) fn remember(&mut self, path: PathBuf) -> u64 {
        if let Some(&ino) = self.by_path.get(&path) {
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.lookups += 1;
                return ino;
            }
        }
        let ino = self.next;
        self.next += 1;
        self.by_path.insert(path.clone(), ino);
        self.by_ino.insert(
            ino,
            Node {
                path: Some(path),
                lookups: 1,
            },
        );
        ino
    }

    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.by_ino.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            if let Some(path) = self.by_ino.remove(&ino).and_then(|n| n.path) {
                if self.by_path.get(&path) == Some(&ino) {
                    self.by_path.remove(&path);
                }
            }
        }
    }

    /// Entries at or below `path`.
    fn under(&self, path: &Path) -> Vec<(PathBuf, u64)> {
        self.by_path
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .map(|(p, &i)| (p.clone(), i))
            .collect()
    }

    /// `path` (and anything below it) no longer exists.
    pub(crate) fn detach(&mut self, path: &Path) {
        for (p, ino) in self.under(path) {
            self.by_path.remove(&p);
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = None;
            }
        }
    }

    fn move_entries(&mut self, entries: Vec<(PathBuf, u64)>, from: &Path, to: &Path) {
        for (p, ino) in entries {
            let rest = p.strip_prefix(from).expect("entry lies under `from`");
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = Some(new.clone());
            }
            self.by_path.insert(new, ino);
        }
    }

    /// `from` was renamed to `to`, replacing whatever was there.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) {
        let moving = self.under(from);
        for (p, _) in &moving {
            self.by_path.remove(p);
        }
        self.detach(to);
        self.move_entries(moving, from, to);
    }

    /// `a` and `b` swapped places (`RENAME_EXCHANGE`).
    fn exchange(&mut self, a: &Path, b: &Path) {
        let (under_a, under_b) = (self.under(a), self.under(b));
        for (p, _) in under_a.iter().chain(&under_b) {
            self.by_path.remove(p);
        }
        self.move_entries(under_a, a, b);
        self.move_entries(under_b, b, a);
    }
}

// ---- attributes ----------------------------------------------------------------

pub(crate) fn system_time(secs: i64, nsec: i64) -> SystemTime {
    let nsec = Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nsec
    }
}

fn kind_of(t: fs::FileType) -> FileType {
    FileType::from_std(t).unwrap_or(FileType::RegularFile)
}

fn attr(ino: u64, m: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: m.size(),
        blocks: m.blocks(),
        atime: system_time(m.atime(), m.atime_nsec()),
        mtime: system_time(m.mtime(), m.mtime_nsec()),
        ctime: system_time(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind_of(m.file_type()),
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

pub(crate) fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    let (tv_sec, tv_nsec) = match t {
        None => (0, libc::UTIME_OMIT),
        Some(TimeOrNow::Now) => (0, libc::UTIME_NOW),
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (
                d.as_secs() as libc::time_t,
                d.subsec_nanos() as libc::c_long,
            ),
            Err(e) => {
                let d = e.duration();
                let (mut s, mut n) = (-(d.as_secs() as i64), -(d.subsec_nanos() as i64));
                if n < 0 {
                    s -= 1;
                    n += 1_000_000_000;
                }
                (s as libc::time_t, n as libc::c_long)
            }
        },
    };
    libc::timespec { tv_sec, tv_nsec }
}

/// Open flags passed on to the real file: the application's, minus those the kernel
/// has already acted on (creation, truncation, append position) and `O_DIRECT`, whose
/// alignment rules apply to the application's buffers, not to ours.
fn open_options(flags: i32, extra: i32) -> OpenOptions {
    let acc = flags & libc::O_ACCMODE;
    let mut o = OpenOptions::new();
    o.read(acc == libc::O_RDONLY || acc == libc::O_RDWR);
    o.write(acc == libc::O_WRONLY || acc == libc::O_RDWR);
    let stripped = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_NOCTTY
        | libc::O_APPEND
        | libc::O_DIRECT;
    o.custom_flags((flags & !stripped) | extra);
    o
}

// ---- the filesystem --------------------------------------------------------------

struct OpenFile {
    file: File,
    /// Path inside the mount when opened, for observers.
    path: Arc<str>,
    id: FileId,
    /// Serves the reads of this handle instead of `pread`, when the observer wants to.
    reader: Option<Box<dyn FileReader>>,
}

/// The attributes a `setattr` request changes.
struct Change {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    /// Access and modification times.
    times: [Option<TimeOrNow>; 2],
}

struct DirItem {
    ino: u64,
    kind: FileType,
    name: OsString,
}

/// The passthrough filesystem; `O` sees every served read and write.
pub struct PassthroughFs<O: Observer> {
    root: PathBuf,
    options: Options,
    observer: Arc<O>,
    inodes: Mutex<Inodes>,
    files: RwLock<HashMap<u64, Arc<OpenFile>>>,
    dirs: Mutex<HashMap<u64, Arc<Vec<DirItem>>>>,
    next_fh: AtomicU64,
    /// The daemon runs as root: new entries are given to the caller.
    as_root: bool,
}

impl<O: Observer> PassthroughFs<O> {
    /// A passthrough over `root` (an existing directory; made absolute by the caller).
    pub fn new(root: PathBuf, options: Options, observer: Arc<O>) -> Self {
        PassthroughFs {
            root,
            options,
            observer,
            inodes: Mutex::new(Inodes::new()),
            files: RwLock::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            // SAFETY: geteuid has no preconditions and cannot fail.
            as_root: unsafe { libc::geteuid() } == 0,
        }
    }

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

    fn child(&self, parent: INodeNo, name: &OsStr) -> R<PathBuf> {
        let dir = self.path(parent)?;
        Ok(match name.as_bytes() {
            b"." => dir,
            b".." => dir.parent().map(Path::to_path_buf).unwrap_or_default(),
            _ => dir.join(name),
        })
    }

    fn handle(&self, fh: FileHandle) -> R<Arc<OpenFile>> {
        self.files
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::from_i32(libc::EBADF))
    }

    /// Registers an open file (`flags`: the application's open flags) and returns its
    /// handle; the observer may take over its reads.
    fn add_handle(&self, file: File, rel: &Path, flags: i32) -> R<u64> {
        let id = FileId::of(&sys(file.metadata())?);
        let path: Arc<str> = rel.to_string_lossy().into();
        let acc = flags & libc::O_ACCMODE;
        let reader = if acc == libc::O_RDONLY || acc == libc::O_RDWR {
            self.observer.open_reader(&path, id, &file)
        } else {
            None
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.files
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                fh,
                Arc::new(OpenFile {
                    file,
                    path,
                    id,
                    reader,
                }),
            );
        Ok(fh)
    }

    fn fopen_flags(&self) -> FopenFlags {
        if self.options.direct_io {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            FopenFlags::empty()
        }
    }

    /// Looks `rel` up and counts a lookup: the attributes to reply with.
    fn entry_of(&self, rel: PathBuf) -> R<FileAttr> {
        let meta = sys(fs::symlink_metadata(self.full(&rel)))?;
        let ino = lock(&self.inodes).remember(rel);
        Ok(attr(ino, &meta))
    }

    fn reply_entry(&self, reply: ReplyEntry, r: R<FileAttr>) {
        match r {
            Ok(a) => reply.entry(&self.options.ttl, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    /// A new entry at `full` made by `req`: give it the caller's owner when the daemon
    /// is root (keeping the group of a setgid directory), then the exact mode asked
    /// for (the daemon's own umask must not change it).
    fn settle(&self, req: &Request, full: &Path, perm: Option<u32>) -> R<()> {
        if self.as_root {
            let setgid_dir = full
                .parent()
                .and_then(|d| fs::metadata(d).ok())
                .is_some_and(|m| m.mode() & libc::S_ISGID != 0);
            let gid = (!setgid_dir).then(|| req.gid());
            sys(std::os::unix::fs::lchown(full, Some(req.uid()), gid))?;
        }
        if let Some(perm) = perm {
            sys(fs::set_permissions(full, fs::Permissions::from_mode(perm)))?;
        }
        Ok(())
    }

    fn do_setattr(&self, ino: INodeNo, fh: Option<FileHandle>, change: Change) -> R<FileAttr> {
        let Change {
            mode,
            uid,
            gid,
            size,
            times,
        } = change;
        let handle = fh.and_then(|fh| self.handle(fh).ok());
        let full = self.path(ino).map(|rel| self.full(&rel));
        let full = || full.clone();
        if let Some(mode) = mode {
            let perm = fs::Permissions::from_mode(mode & 0o7777);
            match &handle {
                Some(h) => sys(h.file.set_permissions(perm))?,
                None => sys(fs::set_permissions(full()?, perm))?,
            }
        }
        if uid.is_some() || gid.is_some() {
            match &handle {
                Some(h) => sys(std::os::unix::fs::fchown(&h.file, uid, gid))?,
                None => sys(std::os::unix::fs::lchown(full()?, uid, gid))?,
            }
        }
        if let Some(size) = size {
            let before = match &handle {
                Some(h) => Some(h.id),
                None => fs::symlink_metadata(full()?).ok().map(|m| FileId::of(&m)),
            };
            if let Some(id) = before {
                self.observer.changing(id);
            }
            match &handle {
                Some(h) => sys(h.file.set_len(size))?,
                None => {
                    let p = c_path(&full()?)?;
                    // SAFETY: `p` is a valid NUL-terminated path.
                    check(unsafe { libc::truncate(p.as_ptr(), size as libc::off_t) })?
                }
            }
        }
        if times.iter().any(Option::is_some) {
            let ts = times.map(timespec);
            match &handle {
                // SAFETY: the descriptor is open for the duration of the call and `ts`
                // holds two timespecs.
                Some(h) => check(unsafe { libc::futimens(h.file.as_raw_fd(), ts.as_ptr()) })?,
                None => {
                    let p = c_path(&full()?)?;
                    // SAFETY: valid path and two timespecs.
                    check(unsafe {
                        libc::utimensat(
                            libc::AT_FDCWD,
                            p.as_ptr(),
                            ts.as_ptr(),
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    })?
                }
            }
        }
        let meta = match &handle {
            Some(h) => sys(h.file.metadata())?,
            None => sys(fs::symlink_metadata(full()?))?,
        };
        if let Some(size) = size {
            self.observer
                .changed(FileId::of(&meta), DataChange::Resized { size });
        }
        Ok(attr(ino.0, &meta))
    }

    fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> R<(FileAttr, u64)> {
        let rel = self.child(parent, name)?;
        let full = self.full(&rel);
        let perm = mode & !umask & 0o7777;
        let keep = flags & libc::O_TRUNC;
        let created = open_options(flags, libc::O_CREAT | libc::O_EXCL | keep)
            .mode(perm)
            .open(&full);
        let file = match created {
            Ok(f) => {
                self.settle(req, &full, Some(perm))?;
                f
            }
            // Someone created it between the kernel's lookup and now: open it as an
            // existing file, as the application's open(2) would have.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && flags & libc::O_EXCL == 0 => {
                let f = sys(open_options(flags, keep).open(&full))?;
                if keep != 0 {
                    let meta = sys(f.metadata())?;
                    self.observer
                        .changed(FileId::of(&meta), DataChange::Resized { size: 0 });
                }
                f
            }
            Err(e) => return Err(errno(&e)),
        };
        let meta = sys(file.metadata())?;
        let fh = self.add_handle(file, &rel, flags)?;
        let ino = lock(&self.inodes).remember(rel);
        Ok((attr(ino, &meta), fh))
    }

    fn served(&self, req: &Request, h: &OpenFile, op: Op, offset: u64, n: usize, t0: Instant) {
        self.observer.io(&IoEvent {
            path: &h.path,
            pid: req.pid(),
            op,
            offset,
            length: n as u64,
            start: t0,
            end: Instant::now(),
        });
    }
}

impl<O: Observer> Filesystem for PassthroughFs<O> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if self.options.direct_io
            && config
                .capabilities()
                .contains(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
        {
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.child(parent, name).and_then(|rel| self.entry_of(rel));
        self.reply_entry(reply, r);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.inodes).forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let meta = match fh.and_then(|fh| self.handle(fh).ok()) {
            Some(h) => sys(h.file.metadata()),
            None => self
                .path(ino)
                .and_then(|rel| sys(fs::symlink_metadata(self.full(&rel)))),
        };
        match meta {
            Ok(m) => reply.attr(&self.options.ttl, &attr(ino.0, &m)),
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
        let change = Change {
            mode,
            uid,
            gid,
            size,
            times: [atime, mtime],
        };
        match self.do_setattr(ino, fh, change) {
            Ok(a) => reply.attr(&self.options.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .path(ino)
            .and_then(|rel| sys(fs::read_link(self.full(&rel))))
        {
            Ok(target) => reply.data(target.as_os_str().as_bytes()),
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
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let rel = self.child(parent, name)?;
            let full = self.full(&rel);
            let p = c_path(&full)?;
            let perm = mode & !umask & 0o7777;
            let kind = mode & libc::S_IFMT;
            // SAFETY: valid path; mode and device are plain integers.
            check(unsafe { libc::mknod(p.as_ptr(), kind | perm, rdev as libc::dev_t) })?;
            self.settle(req, &full, Some(perm))?;
            self.entry_of(rel)
        })();
        self.reply_entry(reply, r);
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
        let r = (|| {
            let rel = self.child(parent, name)?;
            let full = self.full(&rel);
            let perm = mode & !umask & 0o7777;
            sys(fs::DirBuilder::new().mode(perm).create(&full))?;
            self.settle(req, &full, Some(perm))?;
            self.entry_of(rel)
        })();
        self.reply_entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            sys(fs::remove_file(self.full(&rel)))?;
            lock(&self.inodes).detach(&rel);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|rel| {
            sys(fs::remove_dir(self.full(&rel)))?;
            lock(&self.inodes).detach(&rel);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let rel = self.child(parent, link_name)?;
            let full = self.full(&rel);
            sys(std::os::unix::fs::symlink(target, &full))?;
            self.settle(req, &full, None)?;
            self.entry_of(rel)
        })();
        self.reply_entry(reply, r);
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
        let r = (|| {
            let from = self.child(parent, name)?;
            let to = self.child(newparent, newname)?;
            let (f, t) = (self.full(&from), self.full(&to));
            if flags.is_empty() {
                sys(fs::rename(&f, &t))?;
            } else {
                let (cf, ct) = (c_path(&f)?, c_path(&t)?);
                // SAFETY: valid paths; flags come from the kernel.
                check(unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        cf.as_ptr(),
                        libc::AT_FDCWD,
                        ct.as_ptr(),
                        flags.bits(),
                    )
                })?;
            }
            let mut inodes = lock(&self.inodes);
            if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                inodes.exchange(&from, &to);
            } else {
                inodes.rename(&from, &to);
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let existing = self.full(&self.path(ino)?);
            let rel = self.child(newparent, newname)?;
            sys(fs::hard_link(existing, self.full(&rel)))?;
            self.entry_of(rel)
        })();
        self.reply_entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = self.path(ino).and_then(|rel| {
            let file = sys(open_options(flags.0, 0).open(self.full(&rel)))?;
            self.add_handle(file, &rel, flags.0)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), self.fopen_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let h = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let t0 = Instant::now();
        let mut buf = vec![0u8; size as usize];
        let mut done = 0;
        if let Some(reader) = &h.reader {
            match reader.read_at(&h.file, offset, &mut buf, req.pid()) {
                Ok(n) => done = n.min(buf.len()),
                Err(e) => return reply.error(errno(&e)),
            }
        }
        while h.reader.is_none() && done < buf.len() {
            match h.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if done == 0 => return reply.error(errno(&e)),
                Err(_) => break,
            }
        }
        self.served(req, &h, Op::Read, offset, done, t0);
        reply.data(&buf[..done]);
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
        let h = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let t0 = Instant::now();
        let mut done = 0;
        let mut failed = None;
        self.observer.changing(h.id);
        while done < data.len() {
            match h.file.write_at(&data[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if done > 0 {
            let len = done as u64;
            self.observer
                .changed(h.id, DataChange::Written { offset, len });
        }
        if let (Some(e), 0) = (failed, done) {
            return reply.error(errno(&e));
        }
        self.served(req, &h, Op::Write, offset, done, t0);
        reply.written(done as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Writes are not buffered here: nothing to push out on close(2).
        reply.ok();
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
        self.files
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.handle(fh).and_then(|h| {
            sys(if datasync {
                h.file.sync_data()
            } else {
                h.file.sync_all()
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = (|| {
            let rel = self.path(ino)?;
            let full = self.full(&rel);
            let parent_ino = match rel.parent() {
                Some(p) => lock(&self.inodes).by_path.get(p).copied().unwrap_or(ROOT),
                None => ROOT,
            };
            let mut items = vec![
                DirItem {
                    ino: ino.0,
                    kind: FileType::Directory,
                    name: ".".into(),
                },
                DirItem {
                    ino: parent_ino,
                    kind: FileType::Directory,
                    name: "..".into(),
                },
            ];
            for entry in sys(fs::read_dir(&full))? {
                let entry = sys(entry)?;
                let kind = entry
                    .file_type()
                    .map(kind_of)
                    .unwrap_or(FileType::RegularFile);
                items.push(DirItem {
                    ino: entry.ino(),
                    kind,
                    name: entry.file_name(),
                });
            }
            let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
            lock(&self.dirs).insert(fh, Arc::new(items));
            Ok(fh)
        })();
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
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
        let Some(items) = lock(&self.dirs).get(&fh.0).cloned() else {
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
        lock(&self.dirs).remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.path(ino).and_then(|rel| {
            let dir = sys(File::open(self.full(&rel)))?;
            sys(if datasync {
                dir.sync_data()
            } else {
                dir.sync_all()
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let r = (|| {
            let p = c_path(&self.root)?;
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
        match self.do_create(req, parent, name, mode, umask, flags) {
            Ok((a, fh)) => reply.created(
                &self.options.ttl,
                &a,
                Generation(0),
                FileHandle(fh),
                self.fopen_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let r = self.handle(fh).and_then(|h| {
            if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
                self.observer.changing(h.id);
            }
            // SAFETY: the descriptor is open for the duration of the call.
            check(unsafe {
                libc::fallocate(
                    h.file.as_raw_fd(),
                    mode,
                    offset as libc::off_t,
                    length as libc::off_t,
                )
            })?;
            // Plain allocation keeps the bytes; punching, zeroing, collapsing and
            // inserting change them from `offset` on (the last two shift the rest).
            if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
                let len = u64::MAX - offset;
                self.observer
                    .changed(h.id, DataChange::Written { offset, len });
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn lookups_share_one_inode_per_path_until_forgotten() {
        let mut t = Inodes::new();
        let a = t.remember(p("a"));
        assert_eq!(t.remember(p("a")), a);
        assert_ne!(t.remember(p("b")), a);
        t.forget(a, 1);
        assert_eq!(t.path(a).unwrap(), p("a"));
        t.forget(a, 1);
        assert!(t.path(a).is_err());
        assert_ne!(t.remember(p("a")), a, "inode numbers are never reused");
        t.forget(ROOT, 100);
        assert_eq!(t.path(ROOT).unwrap(), p(""));
    }

    #[test]
    fn rename_moves_a_directory_and_everything_below_it() {
        let mut t = Inodes::new();
        let d = t.remember(p("d"));
        let f = t.remember(p("d/sub/f"));
        let other = t.remember(p("dx"));
        let victim = t.remember(p("e"));
        t.rename(&p("d"), &p("e"));
        assert_eq!(t.path(d).unwrap(), p("e"));
        assert_eq!(t.path(f).unwrap(), p("e/sub/f"));
        assert_eq!(
            t.path(other).unwrap(),
            p("dx"),
            "component-wise prefix only"
        );
        assert!(t.path(victim).is_err(), "the replaced entry is detached");
        assert_eq!(t.by_path.get(&p("e/sub/f")), Some(&f));
        assert!(!t.by_path.contains_key(&p("d/sub/f")));
    }

    #[test]
    fn exchange_swaps_and_unlink_detaches() {
        let mut t = Inodes::new();
        let (a, b) = (t.remember(p("a")), t.remember(p("b")));
        let inner = t.remember(p("a/x"));
        t.exchange(&p("a"), &p("b"));
        assert_eq!(t.path(a).unwrap(), p("b"));
        assert_eq!(t.path(b).unwrap(), p("a"));
        assert_eq!(t.path(inner).unwrap(), p("b/x"));
        t.detach(&p("b"));
        assert!(t.path(a).is_err() && t.path(inner).is_err());
        assert_eq!(t.path(b).unwrap(), p("a"));
    }

    #[test]
    fn errno_keeps_the_os_error() {
        let e = io::Error::from_raw_os_error(libc::ENOTEMPTY);
        assert_eq!(errno(&e).code(), libc::ENOTEMPTY);
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "x");
        assert_eq!(errno(&e).code(), libc::EACCES);
        let e = io::Error::other("x");
        assert_eq!(errno(&e).code(), libc::EIO);
    }

    #[test]
    fn open_flags_drop_what_the_kernel_handled() {
        // Only checks that the options build for every access mode; the flags
        // themselves are exercised through real mounts in tests/test_mount_trace.py.
        for acc in [libc::O_RDONLY, libc::O_WRONLY, libc::O_RDWR] {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("f");
            fs::write(&f, b"x").unwrap();
            open_options(acc | libc::O_APPEND | libc::O_TRUNC, 0)
                .open(&f)
                .unwrap();
            assert_eq!(fs::read(&f).unwrap(), b"x", "O_TRUNC is the kernel's job");
        }
    }

    #[test]
    fn times_before_the_epoch() {
        let t = UNIX_EPOCH - Duration::from_millis(1500);
        let ts = timespec(Some(TimeOrNow::SpecificTime(t)));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-2, 500_000_000));
        assert_eq!(system_time(-2, 500_000_000), t);
    }
}
