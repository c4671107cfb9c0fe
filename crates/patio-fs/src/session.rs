//! The life of a mount: checking what the user named, mounting, serving in the
//! background until told to stop, unmounting.
//!
//! A mount ends in one of three ways, and each lets the caller finish its work (write
//! a trace, say) after the file system is gone:
//!
//! * SIGINT, SIGTERM or SIGHUP: the mount point is unmounted (`umount2`, or
//!   `fusermount3 -u` when not root) and the serving threads are joined. If the mount
//!   point is busy (a process has a file open or its working directory there), the
//!   mount stays and the caller is told; a second signal detaches it lazily
//!   (`MNT_DETACH`) and the session ends without waiting for those users.
//! * An external `fusermount3 -u MOUNTPOINT` (or `umount`): the kernel ends the
//!   session and the serving threads return.
//! * A failure of the session itself, reported as an error.

use crate::{shown, FsError, Result};
use fuser::{Config, Filesystem, MountOption, SessionACL};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How a mount is presented to the kernel.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// Let users other than the one who mounted use the mount (`allow_other`; a
    /// non-root user needs `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// Source name shown in /proc/mounts.
    pub fsname: String,
    /// Worker threads serving requests.
    pub threads: usize,
    /// Further mount options (`-o` of the container mount), after the ones every
    /// mount has.
    pub options: Vec<MountOption>,
}

impl Default for MountConfig {
    fn default() -> Self {
        MountConfig {
            allow_other: false,
            fsname: "patio".into(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get().clamp(2, 8))
                .unwrap_or(2),
            options: Vec::new(),
        }
    }
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Unmounted on this signal.
    Signal(i32),
    /// Unmounted from outside (`fusermount3 -u`, `umount`).
    Unmounted,
    /// Detached lazily on a second signal while busy; users that still had files open
    /// lose the file system when this process exits.
    Detached,
    /// Not ended: the counters of a mount still serving (live statistics).
    Running,
}

fn not_found_or(e: io::Error, what: &str, p: &Path) -> FsError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => FsError::Invalid(format!("{what} {} does not exist", shown(p))),
        Some(libc::ENOTCONN) => FsError::Invalid(format!(
            "{what} {}: transport endpoint is not connected (a FUSE mount whose daemon died? \
             unmount it with `fusermount3 -u {}`)",
            shown(p),
            shown(p)
        )),
        _ => FsError::io(format!("{what} {}", shown(p)), e),
    }
}

/// The source directory, absolute: it must exist and be a directory.
pub fn check_source(p: &Path) -> Result<PathBuf> {
    let meta = fs::metadata(p).map_err(|e| not_found_or(e, "source directory", p))?;
    if !meta.is_dir() {
        return Err(FsError::Invalid(format!(
            "source {} is not a directory",
            shown(p)
        )));
    }
    fs::canonicalize(p).map_err(|e| FsError::io(format!("source directory {}", shown(p)), e))
}

/// The mount point, absolute: an existing empty directory outside `source` (a mount
/// inside its own source would serve itself and deadlock).
pub fn check_mountpoint(p: &Path, source: &Path) -> Result<PathBuf> {
    let meta = fs::metadata(p).map_err(|e| not_found_or(e, "mount point", p))?;
    if !meta.is_dir() {
        return Err(FsError::Invalid(format!(
            "mount point {} is not a directory",
            shown(p)
        )));
    }
    let mut entries =
        fs::read_dir(p).map_err(|e| FsError::io(format!("mount point {}", shown(p)), e))?;
    if entries.next().is_some() {
        return Err(FsError::Invalid(format!(
            "mount point {} is not empty",
            shown(p)
        )));
    }
    let canonical =
        fs::canonicalize(p).map_err(|e| FsError::io(format!("mount point {}", shown(p)), e))?;
    if canonical.starts_with(source) {
        return Err(FsError::Invalid(format!(
            "mount point {} lies inside the source directory {}: the mount would contain itself",
            shown(p),
            shown(source)
        )));
    }
    if is_mount_point(&canonical) {
        // Mounting over it would hide that mount, and stopping ours (an unmount of the
        // path) could then unmount the wrong one.
        return Err(FsError::Invalid(format!(
            "mount point {} is already a mount point: unmount it first",
            shown(p)
        )));
    }
    Ok(canonical)
}

/// Whether `canonical` is where a file system is mounted: listed as a mount point in
/// /proc/self/mountinfo (octal escapes decoded), or, without /proc, on another device
/// than its parent.
pub fn is_mount_point(canonical: &Path) -> bool {
    match fs::read_to_string("/proc/self/mountinfo") {
        Ok(info) => info.lines().any(|line| {
            line.split(' ')
                .nth(4)
                .is_some_and(|field| Path::new(&unescape_mountinfo(field)) == canonical)
        }),
        Err(_) => {
            use std::os::unix::fs::MetadataExt;
            let parent = canonical.parent().unwrap_or(canonical);
            match (fs::metadata(canonical), fs::metadata(parent)) {
                (Ok(a), Ok(b)) => a.dev() != b.dev(),
                _ => false,
            }
        }
    }
}

/// A mountinfo path field: spaces, tabs, newlines and backslashes are `\ooo` octal.
fn unescape_mountinfo(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if octal {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// `/dev/fuse` must exist and be the FUSE character device.
pub fn check_fuse() -> Result<()> {
    let dev = Path::new("/dev/fuse");
    match fs::metadata(dev) {
        Ok(m) if m.file_type().is_char_device() => Ok(()),
        Ok(_) => Err(FsError::Invalid(
            "FUSE is unavailable: /dev/fuse is not a character device".into(),
        )),
        Err(e) => Err(FsError::Invalid(format!(
            "FUSE is unavailable: /dev/fuse: {e} (load the fuse module; in a container, \
             pass the device /dev/fuse and CAP_SYS_ADMIN)"
        ))),
    }
}

/// Unmounts `mountpoint` (lazily with `lazy`): `umount2` directly, or the setuid
/// `fusermount3 -u` when that is not permitted. A busy mount point is `EBUSY`.
pub fn unmount(mountpoint: &Path, lazy: bool) -> io::Result<()> {
    let c = CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EPERM) {
        return Err(e);
    }
    let helper = std::env::var_os("FUSERMOUNT_PATH").unwrap_or_else(|| "fusermount3".into());
    let mut cmd = Command::new(helper);
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd.arg("--").arg(mountpoint).output()?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if text.contains("busy") {
        Err(io::Error::from_raw_os_error(libc::EBUSY))
    } else {
        Err(io::Error::other(text))
    }
}

/// Mounts `fs` on `mountpoint` (already checked) and serves it until the session ends
/// (see the module documentation). `notify` receives one-line messages meant for the
/// user: that the mount is ready, that it is busy. Requests are served with
/// `default_permissions` (the kernel checks modes and owners).
pub fn serve<FS: Filesystem>(
    fs: FS,
    mountpoint: &Path,
    cfg: &MountConfig,
    notify: &mut dyn FnMut(&str),
) -> Result<Ended> {
    check_fuse()?;
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(cfg.fsname.clone()),
        MountOption::Subtype("patio".into()),
        MountOption::DefaultPermissions,
    ];
    config.mount_options.extend(cfg.options.iter().cloned());
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads.max(1));
    // Registered before mounting: a signal that arrives while mounting stays pending
    // and unmounts right after.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| FsError::io("cannot install signal handlers", e))?;
    let session = fuser::spawn_mount(fs, mountpoint, &config).map_err(|e| {
        FsError::io(
            format!("cannot mount a FUSE file system on {}", shown(mountpoint)),
            e,
        )
    })?;
    log::info!(
        "mounted {} on {} ({} serving threads{})",
        cfg.fsname,
        shown(mountpoint),
        cfg.threads.max(1),
        if cfg.allow_other { ", allow_other" } else { "" }
    );
    notify(&format!("mounted on {}", shown(mountpoint)));

    let mut ended = Ended::Unmounted;
    let mut busy = false;
    let mut detached_at: Option<Instant> = None;
    loop {
        if session.guard.is_finished() {
            break;
        }
        if let Some(t) = detached_at {
            // Detached while users remain: they keep the session alive; do not wait
            // for them longer than a moment.
            if t.elapsed() > Duration::from_secs(1) {
                signals.handle().close();
                return Ok(Ended::Detached);
            }
        }
        for sig in signals.pending() {
            if detached_at.is_some() {
                continue;
            }
            if busy {
                log::info!("signal {sig} while busy: detaching {}", shown(mountpoint));
                unmount(mountpoint, true)
                    .map_err(|e| FsError::io(format!("cannot detach {}", shown(mountpoint)), e))?;
                ended = Ended::Detached;
                detached_at = Some(Instant::now());
                continue;
            }
            log::info!("signal {sig}: unmounting {}", shown(mountpoint));
            match unmount(mountpoint, false) {
                Ok(()) => ended = Ended::Signal(sig),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    busy = true;
                    notify(&format!(
                        "{} is busy (a process has a file or its working directory there); \
                         still mounted — signal again to detach it lazily",
                        shown(mountpoint)
                    ));
                }
                Err(e) => {
                    return Err(FsError::io(
                        format!("cannot unmount {}", shown(mountpoint)),
                        e,
                    ))
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signals.handle().close();
    log::info!("session on {} ended: {ended:?}", shown(mountpoint));
    session
        .join()
        .map_err(|e| FsError::io(format!("FUSE session on {}", shown(mountpoint)), e))?;
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_recognised() {
        assert!(is_mount_point(Path::new("/")));
        assert!(is_mount_point(Path::new("/proc")));
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mount_point(&fs::canonicalize(dir.path()).unwrap()));
        assert_eq!(unescape_mountinfo("/a\\040b\\134c\\0"), "/a b\\c\\0");
    }

    #[test]
    fn bad_sources_and_mount_points_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let msg = |r: Result<PathBuf>| r.unwrap_err().to_string();
        assert!(msg(check_source(&src)).contains("does not exist"));
        fs::write(&src, b"x").unwrap();
        assert!(msg(check_source(&src)).contains("not a directory"));
        fs::remove_file(&src).unwrap();
        fs::create_dir(&src).unwrap();
        let src = check_source(&src).unwrap();

        let mnt = dir.path().join("mnt");
        assert!(msg(check_mountpoint(&mnt, &src)).contains("does not exist"));
        fs::create_dir(&mnt).unwrap();
        fs::write(mnt.join("f"), b"x").unwrap();
        assert!(msg(check_mountpoint(&mnt, &src)).contains("not empty"));
        fs::remove_file(mnt.join("f")).unwrap();
        assert_eq!(
            check_mountpoint(&mnt, &src).unwrap(),
            fs::canonicalize(&mnt).unwrap()
        );
        let inner = src.join("inner");
        fs::create_dir(&inner).unwrap();
        assert!(msg(check_mountpoint(&inner, &src)).contains("inside the source"));
    }
}
