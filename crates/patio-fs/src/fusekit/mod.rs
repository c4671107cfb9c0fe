//! FUSE helpers shared by the mounts that answer requests themselves (the passthrough
//! and the container mount): errno mapping, attributes from backend metadata, the
//! owner and setgid rule for new entries, paths of children, open-handle and directory
//! listing tables, `statfs` and the replies every mount sends the same way. One
//! definition of each, so a rule (in particular who owns a new entry) cannot drift
//! between the mounts.

mod inodes;

pub(crate) use inodes::{Inodes, ROOT};

use fuser::{
    Errno, FileAttr, FileType, Generation, INodeNo, InitFlags, KernelConfig, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyStatfs, Request, TimeOrNow,
};
use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The answer of a request: a value or the `errno` to reply with.
pub(crate) type R<T> = std::result::Result<T, Errno>;

// ---- errors ----------------------------------------------------------------------

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

/// An OS result as a request's answer.
pub(crate) fn sys<T>(r: io::Result<T>) -> R<T> {
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

pub(crate) fn errno_of(code: libc::c_int) -> Errno {
    Errno::from_i32(code)
}

pub(crate) fn enoent() -> Errno {
    errno_of(libc::ENOENT)
}

pub(crate) fn c_path(p: &Path) -> R<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| errno_of(libc::EINVAL))
}

/// A mutex's guard; a thread that panicked while holding it does not stop the mount.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---- paths -----------------------------------------------------------------------

/// The backend path of `rel` (relative to the mount's root) under `root`.
pub(crate) fn under_root(root: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// The path of entry `name` of directory `dir` (both relative to the mount's root).
pub(crate) fn child_path(dir: PathBuf, name: &OsStr) -> PathBuf {
    match name.as_bytes() {
        b"." => dir,
        b".." => dir.parent().map(Path::to_path_buf).unwrap_or_default(),
        _ => dir.join(name),
    }
}

// ---- attributes ------------------------------------------------------------------

pub(crate) fn system_time(secs: i64, nsec: i64) -> SystemTime {
    let nsec = Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nsec
    }
}

pub(crate) fn kind_of(t: fs::FileType) -> FileType {
    FileType::from_std(t).unwrap_or(FileType::RegularFile)
}

/// The attributes of a backend entry as they are, under the mount's inode `ino`.
pub(crate) fn attr(ino: u64, m: &Metadata) -> FileAttr {
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

/// Sets the access and modification times (`None`: unchanged) of the entry at `full`
/// itself (a symbolic link is not followed).
pub(crate) fn set_times(full: &Path, times: [Option<TimeOrNow>; 2]) -> R<()> {
    let ts = times.map(timespec);
    let p = c_path(full)?;
    // SAFETY: valid NUL-terminated path and two timespecs.
    check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            p.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

// ---- new entries -----------------------------------------------------------------

/// The daemon runs as root (then new entries are given to their callers).
pub(crate) fn daemon_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Owner and mode of a new entry at `full` made by `req`. When the daemon is root the
/// entry gets the caller's uid and gid, except that a setgid directory gives its own
/// group (as the kernel does for local file systems); then the exact mode `perm` is
/// set, so the daemon's umask cannot change it (`None`: left as created, for links).
pub(crate) fn settle_new_entry(
    req: &Request,
    full: &Path,
    as_root: bool,
    perm: Option<u32>,
) -> R<()> {
    if as_root {
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

// ---- kernel options --------------------------------------------------------------

/// Asks the kernel to allow shared `mmap` of files opened with `FOPEN_DIRECT_IO`
/// (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux ≥ 6.6); older kernels refuse such maps with
/// `ENODEV`. Returns whether the kernel agreed.
pub(crate) fn allow_direct_io_mmap(config: &mut KernelConfig) -> bool {
    config
        .capabilities()
        .contains(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
        && config
            .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
            .is_ok()
}

// ---- handles and listings ----------------------------------------------------------

/// Open handles by number.
pub(crate) struct Handles<T> {
    map: RwLock<HashMap<u64, Arc<T>>>,
}

impl<T> Handles<T> {
    pub(crate) fn new() -> Self {
        Handles {
            map: RwLock::new(HashMap::new()),
        }
    }

    /// The handle `fh`, or `EBADF`.
    pub(crate) fn get(&self, fh: u64) -> R<Arc<T>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh)
            .cloned()
            .ok_or(errno_of(libc::EBADF))
    }

    pub(crate) fn insert(&self, fh: u64, value: T) {
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, Arc::new(value));
    }

    pub(crate) fn remove(&self, fh: u64) -> Option<Arc<T>> {
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh)
    }
}

/// One entry of a directory listing.
pub(crate) struct DirItem {
    pub(crate) ino: u64,
    pub(crate) kind: FileType,
    pub(crate) name: OsString,
}

/// Directory listings taken at `opendir`, served by `readdir` until `releasedir`.
pub(crate) struct Listings {
    map: Mutex<HashMap<u64, Arc<Vec<DirItem>>>>,
}

impl Listings {
    pub(crate) fn new() -> Self {
        Listings {
            map: Mutex::new(HashMap::new()),
        }
    }

    /// `.` (`ino`) and `..` (`parent`), the first two entries of every listing.
    pub(crate) fn dots(ino: u64, parent: u64) -> Vec<DirItem> {
        vec![
            DirItem {
                ino,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirItem {
                ino: parent,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ]
    }

    pub(crate) fn insert(&self, fh: u64, items: Vec<DirItem>) {
        lock(&self.map).insert(fh, Arc::new(items));
    }

    /// Replies to `readdir` of listing `fh` from entry `offset` on.
    pub(crate) fn reply(&self, fh: u64, offset: u64, mut reply: ReplyDirectory) {
        let Some(items) = lock(&self.map).get(&fh).cloned() else {
            return reply.error(errno_of(libc::EBADF));
        };
        for (i, item) in items.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(item.ino), (i + 1) as u64, item.kind, &item.name) {
                break;
            }
        }
        reply.ok();
    }

    pub(crate) fn remove(&self, fh: u64) {
        lock(&self.map).remove(&fh);
    }
}

// ---- directories and file systems --------------------------------------------------

/// `fsync` (or `fdatasync`) of the directory at `full`.
pub(crate) fn sync_dir(full: &Path, datasync: bool) -> R<()> {
    let dir = sys(File::open(full))?;
    sys(if datasync {
        dir.sync_data()
    } else {
        dir.sync_all()
    })
}

/// Replies to `statfs` with the numbers of the file system holding `root`.
pub(crate) fn reply_statfs(root: &Path, reply: ReplyStatfs) {
    let r = (|| {
        let p = c_path(root)?;
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

// ---- replies ---------------------------------------------------------------------

pub(crate) fn reply_empty(reply: ReplyEmpty, r: R<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Replies to a request that made or found an entry (`ttl`: how long the kernel may
/// keep it).
pub(crate) fn reply_entry(reply: ReplyEntry, ttl: &Duration, r: R<FileAttr>) {
    match r {
        Ok(a) => reply.entry(ttl, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn times_before_the_epoch() {
        let t = UNIX_EPOCH - Duration::from_millis(1500);
        let ts = timespec(Some(TimeOrNow::SpecificTime(t)));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-2, 500_000_000));
        assert_eq!(system_time(-2, 500_000_000), t);
    }

    #[test]
    fn children_and_backend_paths() {
        let p = PathBuf::from;
        assert_eq!(child_path(p("a/b"), OsStr::new(".")), p("a/b"));
        assert_eq!(child_path(p("a/b"), OsStr::new("..")), p("a"));
        assert_eq!(child_path(p(""), OsStr::new("..")), p(""));
        assert_eq!(child_path(p("a"), OsStr::new("c")), p("a/c"));
        assert_eq!(under_root(Path::new("/r"), Path::new("")), p("/r"));
        assert_eq!(under_root(Path::new("/r"), Path::new("x/y")), p("/r/x/y"));
    }

    #[test]
    fn handles_are_found_until_removed() {
        let t: Handles<u32> = Handles::new();
        t.insert(3, 7);
        assert_eq!(*t.get(3).unwrap(), 7);
        assert_eq!(t.get(4).unwrap_err().code(), libc::EBADF);
        assert_eq!(t.remove(3).map(|v| *v), Some(7));
        assert!(t.get(3).is_err() && t.remove(3).is_none());
    }
}
