//! The passthrough's namespace: lookups, attributes (`getattr`, `setattr`), directory
//! changes (`mknod`, `mkdir`, `symlink`, `link`, `unlink`, `rmdir`, `rename`) and
//! directory listings, each forwarded to the same path under the source.

use super::{Change, DataChange, FileId, Observer, PassthroughFs};
use crate::fusekit::{self, c_path, check, lock, sys, DirItem, Listings, R, ROOT};
use fuser::{FileAttr, FileHandle, INodeNo, RenameFlags, Request};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, DirEntryExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

impl<O: Observer> PassthroughFs<O> {
    /// Looks `rel` up and counts a lookup: the attributes to reply with.
    pub(super) fn entry_of(&self, rel: PathBuf) -> R<FileAttr> {
        let meta = sys(fs::symlink_metadata(self.full(&rel)))?;
        let ino = lock(&self.inodes).remember(rel);
        Ok(fusekit::attr(ino, &meta))
    }

    /// A new entry at `full` made by `req`: the owner rule of every mount, then the
    /// exact mode asked for.
    fn settle(&self, req: &Request, full: &Path, perm: Option<u32>) -> R<()> {
        fusekit::settle_new_entry(req, full, self.as_root, perm)
    }

    pub(super) fn do_getattr(&self, ino: INodeNo, fh: Option<FileHandle>) -> R<FileAttr> {
        let meta = match fh.and_then(|fh| self.handle(fh).ok()) {
            Some(h) => sys(h.file.metadata()),
            None => self
                .path(ino)
                .and_then(|rel| sys(fs::symlink_metadata(self.full(&rel)))),
        }?;
        Ok(fusekit::attr(ino.0, &meta))
    }

    pub(super) fn do_setattr(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
        change: Change,
    ) -> R<FileAttr> {
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
            match &handle {
                Some(h) => {
                    let ts = times.map(fusekit::timespec);
                    // SAFETY: the descriptor is open for the duration of the call and
                    // `ts` holds two timespecs.
                    check(unsafe { libc::futimens(h.file.as_raw_fd(), ts.as_ptr()) })?
                }
                None => fusekit::set_times(&full()?, times)?,
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
        Ok(fusekit::attr(ino.0, &meta))
    }

    pub(super) fn do_readlink(&self, ino: INodeNo) -> R<Vec<u8>> {
        let target = sys(fs::read_link(self.full(&self.path(ino)?)))?;
        Ok(target.as_os_str().as_bytes().to_vec())
    }

    /// `mknod` with `mode` (type and permission bits, the umask already applied).
    pub(super) fn do_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> R<FileAttr> {
        let rel = self.child(parent, name)?;
        let full = self.full(&rel);
        let p = c_path(&full)?;
        let perm = mode & 0o7777;
        let kind = mode & libc::S_IFMT;
        // SAFETY: valid path; mode and device are plain integers.
        check(unsafe { libc::mknod(p.as_ptr(), kind | perm, rdev as libc::dev_t) })?;
        self.settle(req, &full, Some(perm))?;
        self.entry_of(rel)
    }

    pub(super) fn do_mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        perm: u32,
    ) -> R<FileAttr> {
        let rel = self.child(parent, name)?;
        let full = self.full(&rel);
        sys(fs::DirBuilder::new().mode(perm).create(&full))?;
        self.settle(req, &full, Some(perm))?;
        self.entry_of(rel)
    }

    pub(super) fn do_symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
    ) -> R<FileAttr> {
        let rel = self.child(parent, link_name)?;
        let full = self.full(&rel);
        sys(std::os::unix::fs::symlink(target, &full))?;
        self.settle(req, &full, None)?;
        self.entry_of(rel)
    }

    pub(super) fn do_link(&self, ino: INodeNo, newparent: INodeNo, newname: &OsStr) -> R<FileAttr> {
        let existing = self.full(&self.path(ino)?);
        let rel = self.child(newparent, newname)?;
        sys(fs::hard_link(existing, self.full(&rel)))?;
        self.entry_of(rel)
    }

    /// `unlink` (or `rmdir` when `dir`) of `name` in `parent`.
    pub(super) fn do_remove(&self, parent: INodeNo, name: &OsStr, dir: bool) -> R<()> {
        let rel = self.child(parent, name)?;
        let full = self.full(&rel);
        sys(if dir {
            fs::remove_dir(full)
        } else {
            fs::remove_file(full)
        })?;
        lock(&self.inodes).detach(&rel);
        Ok(())
    }

    pub(super) fn do_rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> R<()> {
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
    }

    /// Lists directory `ino` for `readdir`: the listing's handle.
    pub(super) fn do_opendir(&self, ino: INodeNo) -> R<u64> {
        let rel = self.path(ino)?;
        let full = self.full(&rel);
        let parent_ino = match rel.parent() {
            Some(p) => lock(&self.inodes).ino_of(p).unwrap_or(ROOT),
            None => ROOT,
        };
        let mut items = Listings::dots(ino.0, parent_ino);
        for entry in sys(fs::read_dir(&full))? {
            let entry = sys(entry)?;
            let kind = entry
                .file_type()
                .map(fusekit::kind_of)
                .unwrap_or(fuser::FileType::RegularFile);
            items.push(DirItem {
                ino: entry.ino(),
                kind,
                name: entry.file_name(),
            });
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.dirs.insert(fh, items);
        Ok(fh)
    }
}
