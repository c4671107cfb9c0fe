//! Live statistics of a running mount: while a mount serves, a publisher thread
//! rewrites a small stats file every second, and `patio mount stat MNT` reads it.
//!
//! Why a file in a per-user runtime directory, not a control file inside the mount:
//! reading it does not queue behind the application's requests (a control file would
//! be served by the same FUSE threads), so it answers at once while the mount is
//! busy; it does not show up in listings of the mount or collide with a
//! source file of the same name; and only the user who mounted can read it (the
//! directory is 0700), even on an `allow_other` mount shared with other users.
//!
//! Where: `$XDG_RUNTIME_DIR/patio/` when that is set (the login session's private
//! directory), else `$TMPDIR/patio-UID/` (or `/tmp/patio-UID/`, which must be this
//! user's and not a symbolic link). A reader also looks in the other of the two (and
//! in `/run/user/UID/patio`), so a mount started where `XDG_RUNTIME_DIR` is unset (a
//! batch job) is found from a login shell where it is set, and the other way round.
//! The file is `mount-HASH.json`, HASH a hash of the
//! mount point's canonical path (the file also records the path, so a reader checks
//! it). Each rewrite goes to a temporary file renamed over the old one, so a reader
//! sees a whole file or the one before; the file is removed when the mount ends.
//! What the file holds is the caller's text (the CLI's format); this module only
//! places, rewrites and removes it.

use crate::{shown, FsError, Result};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a running mount rewrites its stats file.
pub const EVERY: Duration = Duration::from_secs(1);

/// What a mount publishes: its counters so far, rendered as the stats file's text.
pub type Render<S> = Box<dyn Fn(&S) -> String + Send>;

fn uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Where stats files may be, the one a mount writes to first.
fn candidate_dirs() -> Vec<PathBuf> {
    let uid = uid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty());
    let mut dirs: Vec<PathBuf> = xdg.iter().map(|d| PathBuf::from(d).join("patio")).collect();
    dirs.push(std::env::temp_dir().join(format!("patio-{uid}")));
    dirs.push(PathBuf::from(format!("/run/user/{uid}/patio")));
    dirs.push(PathBuf::from(format!("/tmp/patio-{uid}")));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let new = !seen.contains(d);
        seen.push(d.clone());
        new
    });
    dirs
}

/// Whether `dir` is a real directory of this user (not a symbolic link).
fn ours(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid())
}

/// The per-user directory of stats files (created 0700 when missing).
pub fn runtime_dir() -> Result<PathBuf> {
    let dir = candidate_dirs().swap_remove(0);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(FsError::io(format!("runtime directory {}", shown(&dir)), e)),
    }
    if !ours(&dir) {
        return Err(FsError::Invalid(format!(
            "runtime directory {} is not a directory of this user",
            shown(&dir)
        )));
    }
    Ok(dir)
}

/// The stats file of a running mount at `mountpoint` (a canonical path), looked for
/// in every directory a mount of this user may have written it to.
pub fn find_stats(mountpoint: &Path) -> Option<PathBuf> {
    let name = file_name(mountpoint);
    candidate_dirs()
        .into_iter()
        .filter(|d| ours(d))
        .map(|d| d.join(&name))
        .find(|f| f.is_file())
}

/// Every stats file of this user's mounts (running or left by a killed one).
pub fn all_stats() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in candidate_dirs().into_iter().filter(|d| ours(d)) {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("mount-") && name.ends_with(".json") {
                out.push(e.path());
            }
        }
    }
    out
}

/// The stats file of the mount at `mountpoint` (a canonical path).
pub fn stats_path(mountpoint: &Path) -> Result<PathBuf> {
    Ok(runtime_dir()?.join(file_name(mountpoint)))
}

fn file_name(mountpoint: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    // FNV-1a, 64 bits: stable across builds and machines.
    let hash = mountpoint
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("mount-{hash:016x}.json")
}

/// Replaces `path` with `text` atomically (a temporary file beside it, renamed).
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// A running publisher: rewrites the stats file every [`EVERY`] until dropped, then
/// removes it.
pub struct Publisher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Publisher {
    /// Starts publishing `text()` for the mount at `mountpoint` (canonical); the first
    /// file is written before this returns.
    pub fn start(
        mountpoint: &Path,
        text: impl Fn() -> String + Send + 'static,
    ) -> Result<Publisher> {
        let path = stats_path(mountpoint)?;
        write_atomic(&path, &text()).map_err(|e| {
            FsError::io(format!("cannot write live statistics {}", shown(&path)), e)
        })?;
        let (stop, stopped) = mpsc::channel::<()>();
        let file = path.clone();
        let thread = std::thread::spawn(move || {
            let mut failed = false;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
                match write_atomic(&file, &text()) {
                    Ok(()) => failed = false,
                    Err(e) if !failed => {
                        log::warn!("cannot write live statistics {}: {e}", shown(&file));
                        failed = true;
                    }
                    Err(_) => {}
                }
            }
        });
        log::debug!("live statistics in {}", shown(&path));
        Ok(Publisher {
            stop: Some(stop),
            thread: Some(thread),
            path,
        })
    }

    /// Where the stats file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

/// Starts a publisher of `render(snapshot())` when the caller asked for one (`render`
/// given); a publisher that cannot start is reported and the mount goes on without.
pub(crate) fn start<S: 'static>(
    mountpoint: &Path,
    render: Option<Render<S>>,
    snapshot: impl Fn() -> S + Send + 'static,
) -> Option<Publisher> {
    let render = render?;
    match Publisher::start(mountpoint, move || render(&snapshot())) {
        Ok(p) => Some(p),
        Err(e) => {
            log::warn!("no live statistics for `patio mount stat`: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_publisher_rewrites_its_file_and_removes_it_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("XDG_RUNTIME_DIR", dir.path());
        let n = Arc::new(AtomicU64::new(0));
        let counter = n.clone();
        let mnt = Path::new("/some/mount point");
        let p = Publisher::start(mnt, move || {
            format!("{}", counter.fetch_add(1, Ordering::Relaxed))
        })
        .unwrap();
        let path = p.path().to_path_buf();
        assert_eq!(path, stats_path(mnt).unwrap());
        assert_eq!(find_stats(mnt), Some(path.clone()));
        assert_eq!(find_stats(Path::new("/elsewhere")), None);
        assert!(all_stats().contains(&path));
        assert!(path.starts_with(dir.path().join("patio")));
        assert_eq!(fs::read_to_string(&path).unwrap(), "0");
        std::thread::sleep(EVERY + Duration::from_millis(300));
        assert_eq!(fs::read_to_string(&path).unwrap(), "1");
        assert_ne!(stats_path(Path::new("/some/mount")).unwrap(), path);
        let mode = fs::metadata(dir.path().join("patio")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(p);
        assert!(!path.exists());
        let left: Vec<_> = fs::read_dir(dir.path().join("patio")).unwrap().collect();
        assert!(left.is_empty(), "no temporary file is left");
    }
}
