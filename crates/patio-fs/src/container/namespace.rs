//! The container mount's namespace: attributes of directories and containers,
//! lookups, new entries (the owner rule of every mount), creating, unlinking (hidden
//! while open) and renaming containers, `setattr` and directory listings (containers
//! show as regular files, hidden names not at all).

use super::state::{FileState, Shared};
use super::{from_ns, time_ns, UNLINKED_PREFIX};
use crate::fusekit::{self, enoent, errno, errno_of, lock, sys, DirItem, Listings, R, ROOT};
use fuser::{FileAttr, FileHandle, FileType, INodeNo, RenameFlags, Request, TimeOrNow};
use patio_container::{layout, tools, QuickStat};
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Shared {
    /// The container's `stat` at `dir`: the one `state` keeps while it is fresh (the
    /// attribute lifetime), else read from the meta files (and kept).
    fn quick_stat(&self, dir: &Path, state: Option<&FileState>) -> R<QuickStat> {
        let kept = state
            .and_then(|s| *lock(&s.quick))
            .filter(|(at, _)| at.elapsed() < self.ttl);
        Ok(match kept {
            Some((_, q)) => q,
            None => {
                let q = tools::stat(dir).map_err(|e| self.fail(&e))?;
                if let Some(s) = state {
                    *lock(&s.quick) = Some((Instant::now(), q));
                }
                q
            }
        })
    }

    /// The size of open file `f` as `getattr` reports it: its container's, or the end
    /// of the furthest write through the mount since the last truncation.
    pub(super) fn size_now(&self, f: &FileState) -> R<u64> {
        let quick = self.quick_stat(&f.dir(), Some(f))?;
        Ok(quick.size.max(f.live_end.load(Ordering::Acquire)))
    }

    /// Attributes of the container at `dir` (`state`: its open state, if any).
    pub(super) fn file_attr(
        &self,
        ino: u64,
        dir: &Path,
        m: &Metadata,
        state: Option<&FileState>,
    ) -> R<FileAttr> {
        let quick = self.quick_stat(dir, state)?;
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
            size,
            // What the logs occupy, as `du` expects (not size/512: a file with holes
            // would report exabytes).
            blocks: quick.disk_bytes.div_ceil(512),
            mtime: from_ns(mtime),
            kind: FileType::RegularFile,
            nlink: 1,
            rdev: 0,
            blksize: 4096,
            ..fusekit::attr(ino, m)
        })
    }

    /// Attributes of whatever is at backend path `full`: a directory or a container.
    pub(super) fn attr_at(&self, ino: u64, full: &Path, state: Option<&FileState>) -> R<FileAttr> {
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
            Ok(fusekit::attr(ino, &m))
        }
    }

    pub(super) fn entry_of(&self, rel: PathBuf) -> R<FileAttr> {
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

    /// Owner and mode of a new entry made by `req`: the owner rule of every mount
    /// ([`fusekit::settle_new_entry`]), then the mode asked for (containers keep owner
    /// `rwx` when the daemon is not root).
    pub(super) fn settle(&self, req: &Request, full: &Path, perm: u32, container: bool) -> R<()> {
        let perm = self.dir_mode(perm, container);
        fusekit::settle_new_entry(req, full, self.as_root, Some(perm))
    }

    pub(super) fn dir_mode(&self, perm: u32, container: bool) -> u32 {
        if container && !self.as_root {
            perm | 0o700
        } else {
            perm
        }
    }

    /// Creates a container at `rel` for `req` with permission bits `perm`.
    pub(super) fn create_container(&self, req: &Request, rel: &Path, perm: u32) -> R<()> {
        let full = self.full(rel);
        match fs::symlink_metadata(&full) {
            Ok(_) => return Err(errno_of(libc::EEXIST)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(errno(&e)),
        }
        layout::create(&full, self.mode).map_err(|e| self.fail(&e))?;
        self.settle(req, &full, perm, true)
    }

    /// Removes the container at `rel` (closing its writers); one still open lives on
    /// under a hidden name until its last handle is released.
    pub(super) fn unlink_container(&self, rel: &Path) -> R<()> {
        let full = self.full(rel);
        self.forget_resting(&full);
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
                inner.changed();
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

    pub(super) fn rename(&self, from: &Path, to: &Path, flags: RenameFlags) -> R<()> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return Err(errno_of(libc::EINVAL));
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
                return Err(errno_of(libc::EEXIST));
            }
            match (from_container, layout::is_container(&ft)) {
                (true, true) => self.unlink_container(to)?,
                (true, false) => return Err(errno_of(libc::EISDIR)),
                (false, true) => return Err(errno_of(libc::ENOTDIR)),
                (false, false) => {}
            }
        }
        self.forget_resting(&ff);
        self.forget_resting(&ft);
        let mut files = lock(&self.files);
        let moving: Vec<(PathBuf, Arc<FileState>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        // Writers name their backend directory: close them before it moves; writes
        // that wait meanwhile open new writers at the new place.
        let mut inners: Vec<_> = moving.iter().map(|(_, f)| lock(&f.inner)).collect();
        let procs: Vec<_> = inners
            .iter()
            .flat_map(|i| i.procs.values().cloned())
            .collect();
        let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
        for g in guards.iter_mut() {
            self.close_writer(g)?;
        }
        // The closed writers' last records are new to the files' readers.
        for i in inners.iter_mut() {
            i.changed();
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

    pub(super) fn setattr(
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
                return Err(errno_of(libc::EISDIR));
            }
            self.live()?;
            match &state {
                Some(f) => self.truncate(f, size)?,
                // Not open: no writers to close.
                None => self.truncate(&FileState::new(PathBuf::new(), full.clone()), size)?,
            }
        }
        if times.iter().any(Option::is_some) {
            fusekit::set_times(&full, times)?;
        }
        self.attr_at(ino.0, &full, state.as_deref())
    }

    pub(super) fn list(&self, ino: INodeNo) -> R<Vec<DirItem>> {
        let rel = self.path(ino)?;
        let full = self.full(&rel);
        if layout::is_container(&full) {
            return Err(errno_of(libc::ENOTDIR));
        }
        let mut items = Listings::dots(ino.0, ROOT);
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
}
