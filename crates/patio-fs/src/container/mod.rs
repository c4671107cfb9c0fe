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
//!   (fork) gets a writer of its own, tied to that handle. A new writer takes over
//!   the logs of an ended writer of the file when one is small enough
//!   (`Writer::reuse`, data up to `--compact-small-log`), so a file opened, written
//!   and closed again and again (a log appended to, a small file rewritten) keeps one
//!   log set instead of growing one per open.
//! * **Durability** is a local file system's. Writers never sync by themselves
//!   (`Writer::set_sync_on_flush(false)`): `close(2)` (FUSE flush) publishes the
//!   closing process's writer to the backend's page cache, which survives the daemon
//!   being killed but not a power loss; `fsync(2)` publishes every writer of the file
//!   and syncs every file of its container (`tools::sync`); a clean unmount
//!   (SIGINT/SIGTERM, `fusermount3 -u`, or a lazy detach while files are still open)
//!   closes every writer still open and syncs the backend file system (`syncfs`).
//! * **Reads** go through one cached [`Reader`] per file. When one writer alone has
//!   unpublished writes (few, all in its buffer), a read lays them over the cached
//!   reader's data (`Writer::overlay`). Otherwise, before the read, writers of that
//!   file with unpublished writes publish them (an index record, no sync; in the order
//!   they became dirty), and the reader is brought up to date when anything was
//!   published, flushed, closed or truncated since it was built: the records the
//!   mount's writers appended and the truncations it appended are laid over it in
//!   memory (`Reader::with_appended`, nothing read); anything else — a writer's new
//!   logs, a rename, more than 1,024 changes — refreshes it from the backend
//!   (`Reader::refresh`: only the index bytes appended since are read, and applied
//!   over its merged index when they are all newer). A process reads its own writes
//!   and every write any process finished through the mount before the read began.
//!   A file nobody has open keeps its reader and stat for its next open (a few files,
//!   see `state::RESTING`), refreshed from the backend then. Changes made in the
//!   backend behind the mount's back (another mount sharing it, a program writing
//!   the containers directly) are seen close-to-open, as NFS gives: when the file is
//!   opened again after nobody had it open (or at the next refresh from the
//!   backend, whichever comes first).
//! * **Ordering.** Overlapping writes of different processes are ordered by the
//!   writers' index records (flush or publish times), as in the container: a write is
//!   ordered after another process's write when that process closed, fsynced or
//!   someone read the file in between. Programs that write disjoint blocks (N-1
//!   checkpoints) never depend on it.
//! * **Attributes.** The size is the larger of the container's size (`tools::stat`,
//!   from the writers' meta files) and the end of every write made through the mount
//!   since the last truncation, so it is right while files are being written; the
//!   modification time is the newest of the container's, the last write's and the
//!   directory's. The container's stat is read again after the attribute lifetime
//!   the kernel is told (1 s; a truncation through the mount updates it). Mode, owner and group are the container directory's: `chmod` and
//!   `chown` change the directory, and the kernel enforces them
//!   (`default_permissions`). When the daemon is not root, container directories keep
//!   owner `rwx` so the daemon can reach its logs, and the file shows those bits.
//! * **Truncation** (`truncate`, `ftruncate`, `open(O_TRUNC)`) publishes every writer
//!   of the file (their writes are ordered before it), appends a truncation record and
//!   lets the writers write on: each notes the truncation in its meta file
//!   (`Writer::note_truncation`), so the container's size stays computable from the
//!   meta files alone. A writer whose data log holds more than compaction lets the
//!   file keep (`dead_ratio` × the new size + `min_dead`) is closed instead, so that
//!   compaction can reclaim it.
//! * **Compaction** ([`compactor`]): after a truncation or the close of a writer, a
//!   background thread compacts the file when it passes the thresholds (index logs,
//!   dead bytes; `patio mount container --compact-*`), after a truncation to zero
//!   always, and once nobody has had it open for 100 ms more tightly (its small logs
//!   merged, at most 64 KiB dead beyond the ratio): the logs of ended writers are
//!   rewritten into one log set, or removed when nothing of them is live, so files
//!   rewritten, truncated or appended to again and again stay bounded.
//! * **Unlink and rename.** Unlink removes the container; while handles are still
//!   open it is first renamed to a hidden `.patio-unlinked.*` directory in the backend
//!   root, which goes when the last handle is released (or at unmount). Rename closes
//!   the writers of everything it moves and renames the backend directory (a target
//!   container is unlinked first). Hard and symbolic links are refused (`EPERM`).
//! * **Direct I/O.** Files are opened `FOPEN_DIRECT_IO` with parallel direct writes:
//!   every application read and write reaches the daemon with its own offset and size
//!   (split above the kernel's 1 MiB per-request limit), never as page-cache chunks.
//!
//! The mount is split along its seams: [`state`] (per-file, per-handle and mount-wide
//! state), [`namespace`] (attributes, lookups, creating, unlinking and renaming
//! containers, listings), [`handles`] (open, release, the end of the mount), [`io`]
//! (writers, publishing, reads, flushes, truncation), [`compactor`] (background
//! compaction) and [`dispatch`] (the request dispatch).

mod compactor;
mod dispatch;
mod handles;
mod io;
mod namespace;
mod pending;
mod state;
#[cfg(test)]
mod tests;

use crate::live::{self, Render};
use crate::session::{self, Ended, MountConfig};
use crate::{shown, FsError, Result};
use fuser::MountOption;
use patio_container::layout;
pub use patio_container::{IndexMode, Thresholds};
use state::Shared;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of the hidden backend directories that hold unlinked containers still open.
pub const UNLINKED_PREFIX: &str = ".patio-unlinked.";

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
    /// Background compaction thresholds; `None` turns it off.
    pub compaction: Option<Thresholds>,
    /// A new writer takes over the logs of an ended writer of the file whose data log
    /// holds at most this many bytes (`Writer::reuse`; 0: never), with or without
    /// compaction.
    pub reuse_limit: u64,
}

/// What the mount did, reported when it ends (serialized: the counters, without
/// `ended`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ContainerSummary {
    #[serde(skip)]
    pub ended: Ended,
    /// Containers written through the mount.
    pub files: u64,
    /// Writers opened (one per file and writing process; a writer opened again after
    /// a close or a closing truncation takes over an ended writer's logs when it can).
    pub writers: u64,
    /// Writers still open when the mount ended, closed (flushed) then.
    pub flushed_at_unmount: u64,
    pub writes: u64,
    pub written_bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    /// Readers built to serve reads (after the index changed)…
    pub reader_builds: u64,
    /// …and those of them that merged every writer's records (the others applied
    /// what was new over the previous reader's merged index).
    pub reader_merges: u64,
    pub truncations: u64,
    /// Background compactions that replaced or removed logs, the index logs they
    /// replaced, the bytes they reclaimed, and those that failed (with the first
    /// message; applications never see these).
    pub compactions: u64,
    pub compacted_logs: u64,
    pub reclaimed_bytes: u64,
    pub compaction_errors: u64,
    pub first_compaction_error: Option<String>,
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

/// The container file system; serve it with [`session::serve`] (or use [`run`]).
pub struct ContainerFs {
    shared: Arc<Shared>,
}

impl ContainerFs {
    /// A mount of `backend` (an existing directory, absolute) creating containers in
    /// index mode `mode`, compacting with the default thresholds.
    pub fn new(backend: PathBuf, mode: IndexMode) -> Self {
        Self::with_compaction(backend, mode, Some(Thresholds::default()))
    }

    /// [`ContainerFs::new`] with the background compaction's thresholds (`None`: off);
    /// writers take over ended writers' logs up to the thresholds' (or the default)
    /// small-log size.
    pub fn with_compaction(
        backend: PathBuf,
        mode: IndexMode,
        compaction: Option<Thresholds>,
    ) -> Self {
        let reuse_limit = compaction.unwrap_or_default().small_log;
        Self::with_settings(backend, mode, compaction, reuse_limit)
    }

    /// [`ContainerFs::with_compaction`] with new writers taking over ended writers' logs
    /// of at most `reuse_limit` data bytes (0: never).
    pub fn with_settings(
        backend: PathBuf,
        mode: IndexMode,
        compaction: Option<Thresholds>,
        reuse_limit: u64,
    ) -> Self {
        ContainerFs {
            shared: Arc::new(Shared::new(backend, mode, compaction, reuse_limit)),
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
/// every writer still open and returns what was done. `live`, when given, publishes
/// the counters while the mount runs ([`crate::live`]).
pub fn run(
    req: &ContainerMount,
    notify: &mut dyn FnMut(&str),
    live: Option<Render<ContainerSummary>>,
) -> Result<ContainerSummary> {
    let (options, allow_other) = parse_options(&req.options)?;
    let backend = check_backend(&req.backend)?;
    let mountpoint = session::check_mountpoint(&req.mountpoint, &backend)?;
    session::check_fuse()?;
    let fs = ContainerFs::with_settings(backend, req.index, req.compaction, req.reuse_limit);
    let shared = fs.shared.clone();
    let cfg = MountConfig {
        allow_other: req.allow_other || allow_other,
        fsname: "patio-container".into(),
        options,
        ..MountConfig::default()
    };
    let publisher = {
        let s = shared.clone();
        live::start(&mountpoint, live, move || s.summary(Ended::Running))
    };
    let ended = session::serve(fs, &mountpoint, &cfg, notify);
    drop(publisher);
    Ok(shared.finish(ended?))
}
