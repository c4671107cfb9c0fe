//! The container mount's `fuser::Filesystem`: each request is answered by the
//! state, namespace, handle and I/O modules; this module only unpacks and replies.

use super::ContainerFs;
use crate::fusekit::{self, enoent, errno_of, lock, sys};
use fuser::{
    FileHandle, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use patio_container::layout;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

fn fopen_flags() -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

impl Filesystem for ContainerFs {
    /// Shared `mmap` of files (opened with `FOPEN_DIRECT_IO`) where the kernel allows
    /// it (Linux 6.6 and later); older kernels refuse shared writable maps (`ENODEV`).
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        fusekit::allow_direct_io_mmap(config);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = &self.shared;
        let r = s.child(parent, name).and_then(|rel| s.entry_of(rel));
        fusekit::reply_entry(reply, &s.ttl, r);
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
                return Err(errno_of(libc::EPERM));
            }
            let rel = s.child(parent, name)?;
            s.create_container(req, &rel, mode & !umask & 0o7777)?;
            s.entry_of(rel)
        })();
        fusekit::reply_entry(reply, &s.ttl, r);
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
        fusekit::reply_entry(reply, &s.ttl, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.child(parent, name).and_then(|rel| {
            let full = s.full(&rel);
            if !sys(fs::symlink_metadata(&full))?.is_dir() {
                return Err(enoent());
            }
            if !layout::is_container(&full) {
                return Err(errno_of(libc::EISDIR));
            }
            s.unlink_container(&rel)
        });
        fusekit::reply_empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.child(parent, name).and_then(|rel| {
            let full = s.full(&rel);
            if layout::is_container(&full) {
                return Err(errno_of(libc::ENOTDIR));
            }
            sys(fs::remove_dir(&full))?;
            lock(&s.inodes).detach(&rel);
            Ok(())
        });
        fusekit::reply_empty(reply, r);
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
        fusekit::reply_empty(reply, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        let r = s.path(ino).and_then(|rel| {
            let full = s.full(&rel);
            if !layout::is_container(&full) {
                return Err(if full.is_dir() {
                    errno_of(libc::EISDIR)
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
                        return Err(errno_of(libc::EISDIR));
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

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match self.shared.fallocate(req, fh, offset, length, mode) {
            Ok(()) => reply.ok(),
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
        fusekit::reply_empty(reply, r);
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
        let r = s.handle(fh).and_then(|h| s.sync_file(&h.file));
        fusekit::reply_empty(reply, r);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        match s.list(ino) {
            Ok(items) => {
                let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
                s.dirs.insert(fh, items);
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
        reply: ReplyDirectory,
    ) {
        self.shared.dirs.reply(fh.0, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.shared.dirs.remove(fh.0);
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
            .and_then(|rel| fusekit::sync_dir(&s.full(&rel), false));
        fusekit::reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        fusekit::reply_statfs(&self.shared.root, reply);
    }
}
