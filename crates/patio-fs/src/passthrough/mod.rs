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
//!
//! The mount is split along its seams: [`namespace`] (lookups, attributes, directory
//! changes and listings), [`handles`] (opening, creating and releasing files) and
//! [`io`] (reads, writes, syncs and `fallocate` on open handles); this module holds the
//! public types, the file system's state and the `fuser::Filesystem` dispatch.

mod handles;
mod io;
mod namespace;

use crate::fusekit::{self, lock, Handles, Inodes, Listings, R};
use fuser::{
    FileHandle, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use patio_core::trace::Op;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

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
    fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], pid: u32)
        -> std::io::Result<usize>;
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

/// An open file of the mount.
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

/// The passthrough filesystem; `O` sees every served read and write.
pub struct PassthroughFs<O: Observer> {
    root: PathBuf,
    options: Options,
    observer: Arc<O>,
    inodes: Mutex<Inodes>,
    files: Handles<OpenFile>,
    dirs: Listings,
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
            files: Handles::new(),
            dirs: Listings::new(),
            next_fh: AtomicU64::new(1),
            as_root: fusekit::daemon_is_root(),
        }
    }

    fn full(&self, rel: &Path) -> PathBuf {
        fusekit::under_root(&self.root, rel)
    }

    fn path(&self, ino: INodeNo) -> R<PathBuf> {
        lock(&self.inodes).path(ino.0)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> R<PathBuf> {
        Ok(fusekit::child_path(self.path(parent)?, name))
    }

    fn handle(&self, fh: FileHandle) -> R<Arc<OpenFile>> {
        self.files.get(fh.0)
    }

    fn fopen_flags(&self) -> FopenFlags {
        if self.options.direct_io {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            FopenFlags::empty()
        }
    }

    fn reply_entry(&self, reply: ReplyEntry, r: R<fuser::FileAttr>) {
        fusekit::reply_entry(reply, &self.options.ttl, r);
    }

    /// Reports a served request to the observer.
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
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if self.options.direct_io {
            fusekit::allow_direct_io_mmap(config);
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
        match self.do_getattr(ino, fh) {
            Ok(a) => reply.attr(&self.options.ttl, &a),
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
        match self.do_readlink(ino) {
            Ok(target) => reply.data(&target),
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
        let r = self.do_mknod(req, parent, name, mode & !umask, rdev);
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
        let r = self.do_mkdir(req, parent, name, mode & !umask & 0o7777);
        self.reply_entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        fusekit::reply_empty(reply, self.do_remove(parent, name, false));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        fusekit::reply_empty(reply, self.do_remove(parent, name, true));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.do_symlink(req, parent, link_name, target);
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
        let r = self.do_rename(parent, name, newparent, newname, flags);
        fusekit::reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = self.do_link(ino, newparent, newname);
        self.reply_entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.do_open(ino, flags.0) {
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
        match self.do_read(req, fh, offset, size) {
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
        match self.do_write(req, fh, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
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
        self.files.remove(fh.0);
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
        fusekit::reply_empty(reply, self.do_fsync(fh, datasync));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.do_opendir(ino) {
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
        reply: ReplyDirectory,
    ) {
        self.dirs.reply(fh.0, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.remove(fh.0);
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
        let r = self
            .path(ino)
            .and_then(|rel| fusekit::sync_dir(&self.full(&rel), datasync));
        fusekit::reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        fusekit::reply_statfs(&self.root, reply);
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
        fusekit::reply_empty(reply, self.do_fallocate(fh, offset, length, mode));
    }
}
