//! Applying a plan: a new container whose one data log holds the file's bytes in the
//! planned order and whose index — the writer's pattern-encoded records — is the
//! remap. Crash-safe and never touching the source: the container is built under a
//! temporary name beside the output, synced, checked against the source's identity,
//! and renamed into place (refusing to replace anything); on any failure the partial
//! output is removed, and what a killed apply left (its temporary output, named after
//! its host and process) is removed by the next apply to the same output.

use crate::error::{ReorgError, Result};
use crate::plan::{FileIdentity, Plan};
use patio_container::{layout, IndexMode, Writer};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes copied per read of the source.
const COPY_BUFFER: usize = 8 << 20;

/// What [`apply`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub path: PathBuf,
    /// Logical bytes (the source's size).
    pub bytes: u64,
    /// Pieces copied (the order's length).
    pub pieces: u64,
    /// Bytes of the index log on disk (the remap as stored).
    pub index_bytes: u64,
}

/// Removes a half-built output when dropped unless disarmed.
struct Partial(Option<PathBuf>);

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// `.<name>.reorg-`: how the temporary outputs for `out` begin.
fn temporary_prefix(out: &Path) -> Result<String> {
    let name = out
        .file_name()
        .ok_or_else(|| ReorgError::io(out, std::io::Error::other("no file name")))?;
    Ok(format!(
        ".{}.reorg-",
        String::from_utf8_lossy(name.as_bytes())
    ))
}

/// `.<name>.reorg-<host>.<pid>-<ns>` beside `out`: a name that says which process on
/// which host is building it.
fn temporary_beside(out: &Path) -> Result<PathBuf> {
    let tmp = format!(
        "{}{}-{}",
        temporary_prefix(out)?,
        layout::claim_base(),
        layout::now_ns()
    );
    Ok(out.with_file_name(tmp))
}

/// Removes what killed applies on this host left beside `out` (temporary outputs
/// whose process is gone; another host's are left alone, their process may live);
/// returns how many.
pub fn remove_leftovers(out: &Path) -> Result<u64> {
    let prefix = format!("{}{}.", temporary_prefix(out)?, layout::host_name());
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !process_alive(pid) {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(|e| ReorgError::io(&path, e))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether process `pid` of this host exists (signal 0: no signal is sent).
pub(crate) fn process_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for the process.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Renames `from` to `to` unless `to` exists (atomically: no window in which an
/// output that appeared meanwhile is replaced).
fn rename_no_replace(from: &Path, to: &Path) -> Result<()> {
    use std::ffi::CString;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| ReorgError::io(p, std::io::Error::other("path holds a NUL byte")))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EEXIST) {
        return Err(ReorgError::OutputExists {
            path: to.to_path_buf(),
        });
    }
    Err(ReorgError::io(to, e))
}

fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], at: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], at + done as u64) {
            Ok(0) => {
                return Err(ReorgError::SourceChanged {
                    path: path.to_path_buf(),
                    what: format!("ends before offset {}", at + done as u64),
                })
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReorgError::io(path, e)),
        }
    }
    Ok(())
}

/// Writes `plan`'s reorganized copy of its file to the new container `out`.
/// `progress(done, total)` is called with logical bytes copied.
pub fn apply(plan: &Plan, out: &Path, mut progress: impl FnMut(u64, u64)) -> Result<Applied> {
    let source = &plan.file;
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(ReorgError::OutputExists {
            path: out.to_path_buf(),
        });
    }
    let file = File::open(source).map_err(|e| ReorgError::io(source, e))?;
    let opened =
        FileIdentity::from_metadata(&file.metadata().map_err(|e| ReorgError::io(source, e))?);
    if let Some(what) = opened.difference(&plan.identity) {
        return Err(ReorgError::StalePlan {
            path: source.clone(),
            what,
        });
    }
    remove_leftovers(out)?;
    let tmp = temporary_beside(out)?;
    let mut partial = Partial(Some(tmp.clone()));
    let mut writer = Writer::create(&tmp, IndexMode::Pattern)?;
    let total = plan.identity.size;
    let mut buf = vec![0u8; COPY_BUFFER.min(total.max(1) as usize)];
    let mut done = 0u64;
    for &(logical, len) in &plan.order {
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(buf.len() as u64) as usize;
            read_exact_at(&file, source, &mut buf[..n], logical + at)?;
            writer.write_at(logical + at, &buf[..n])?;
            at += n as u64;
            done += n as u64;
            progress(done, total);
        }
    }
    let name = writer.name().to_string();
    writer.close()?;
    layout::sync_dir(&tmp)?;
    let now = FileIdentity::from_metadata(&file.metadata().map_err(|e| ReorgError::io(source, e))?);
    if let Some(what) = now.difference(&plan.identity) {
        return Err(ReorgError::SourceChanged {
            path: source.clone(),
            what,
        });
    }
    let index_bytes = std::fs::metadata(layout::index_path(&tmp, &name))
        .map_err(|e| ReorgError::io(&tmp, e))?
        .len();
    rename_no_replace(&tmp, out)?;
    partial.0 = None;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    layout::sync_dir(&parent)?;
    Ok(Applied {
        path: out.to_path_buf(),
        bytes: total,
        pieces: plan.order.len() as u64,
        index_bytes,
    })
}
