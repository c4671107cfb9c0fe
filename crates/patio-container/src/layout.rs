//! The on-disk layout of a container (docs/FORMATS.md, "Container"): one directory
//! per logical file holding a version marker, per-writer data, index and meta files,
//! and a log of truncations.
//!
//! ```text
//! NAME/PATIO            marker: magic PCON, version, index mode
//! NAME/data.<writer>    the writer's data, appended in write order
//! NAME/index.<writer>   header PIDX + framed index records
//! NAME/meta.<writer>    the writer's size/time summary, rewritten at every flush
//! NAME/truncates        header PTRN + framed (key, size) records, any process appends
//! NAME/compacted.<w>    while a compaction publishes log set <w>: the writers it replaces
//! NAME/lock.compact     flock: one compaction at a time
//! NAME/lock.truncates   flock: appends (shared) against the compaction's rewrite (exclusive)
//! NAME/.compact.*       a compaction's logs before they are published (removed on recovery)
//! ```
//!
//! Writer names are `<host>.<pid>.<n>`, claimed by creating the index log with
//! `O_EXCL`, so processes on different nodes sharing the backend never collide.

use crate::error::{ContainerError, Result};
use patio_core::codec::{put_frame, read_blob, read_frames, write_blob, Cursor};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const MARKER: &str = "PATIO";
const MARKER_MAGIC: &[u8; 4] = b"PCON";
const MARKER_VERSION: u16 = 1;
pub const INDEX_MAGIC: &[u8; 4] = b"PIDX";
pub const INDEX_VERSION: u16 = 1;
const META_MAGIC: &[u8; 4] = b"PMET";
const META_VERSION: u16 = 3;
pub const TRUNCATES: &str = "truncates";
const TRUNC_MAGIC: &[u8; 4] = b"PTRN";
const TRUNC_VERSION: u16 = 1;
/// Size of the header of index and truncate logs: magic, version, reserved.
pub const LOG_HEADER: usize = 8;

/// How writers record their index: pattern entries (default) or one entry per write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexMode {
    Pattern,
    Raw,
}

impl IndexMode {
    pub fn name(self) -> &'static str {
        match self {
            IndexMode::Pattern => "pattern",
            IndexMode::Raw => "raw",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "pattern" => Ok(IndexMode::Pattern),
            "raw" => Ok(IndexMode::Raw),
            _ => Err(ContainerError::Invalid(format!(
                "unknown index mode {s:?} (expected pattern or raw)"
            ))),
        }
    }
}

/// Nanoseconds since the epoch: the clock behind write keys and mtimes.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub fn data_path(dir: &Path, writer: &str) -> PathBuf {
    dir.join(format!("data.{writer}"))
}

pub fn index_path(dir: &Path, writer: &str) -> PathBuf {
    dir.join(format!("index.{writer}"))
}

pub fn meta_path(dir: &Path, writer: &str) -> PathBuf {
    dir.join(format!("meta.{writer}"))
}

/// True when `dir` holds a container marker.
pub fn is_container(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// Creates the container directory and marker if they do not exist yet (safe when
/// many processes race) and returns the container's index mode.
pub fn create(dir: &Path, mode: IndexMode) -> Result<IndexMode> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if !dir.is_dir() {
                return Err(ContainerError::Invalid(format!(
                    "{}: exists and is not a directory",
                    dir.display()
                )));
            }
        }
        Err(e) => return Err(ContainerError::io(dir, e)),
    }
    let marker = dir.join(MARKER);
    if marker.exists() {
        return read_marker(dir);
    }
    let tmp = dir.join(format!(".{MARKER}.{}.{}", std::process::id(), now_ns()));
    let blob = write_blob(MARKER_MAGIC, MARKER_VERSION, &[mode as u8]);
    fs::write(&tmp, &blob).map_err(|e| ContainerError::io(&tmp, e))?;
    File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| ContainerError::io(&tmp, e))?;
    // link() fails if another process created the marker first; then theirs stands.
    let linked = fs::hard_link(&tmp, &marker);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_dir(dir)?;
            Ok(mode)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_marker(dir),
        Err(e) => Err(ContainerError::io(&marker, e)),
    }
}

/// Reads the marker: checks that `dir` is a container of a version this build reads.
pub fn read_marker(dir: &Path) -> Result<IndexMode> {
    let path = dir.join(MARKER);
    let bytes = fs::read(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ContainerError::Invalid(format!(
                "{}: not a patio container (no {MARKER} marker)",
                dir.display()
            ))
        } else {
            ContainerError::io(&path, e)
        }
    })?;
    let (_, payload) = read_blob(MARKER_MAGIC, MARKER_VERSION, &bytes)
        .map_err(|e| ContainerError::in_file(&path, e))?;
    match payload.first() {
        Some(0) if payload.len() == 1 => Ok(IndexMode::Pattern),
        Some(1) if payload.len() == 1 => Ok(IndexMode::Raw),
        _ => Err(ContainerError::Corrupt {
            path: path.display().to_string(),
            offset: 20,
            reason: "unknown index mode".into(),
        }),
    }
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| ContainerError::io(dir, e))
}

fn log_header(magic: &[u8; 4], version: u16) -> [u8; LOG_HEADER] {
    let mut h = [0u8; LOG_HEADER];
    h[..4].copy_from_slice(magic);
    h[4..6].copy_from_slice(&version.to_le_bytes());
    h
}

/// Checks the header of an index or truncate log; returns the frames after it.
pub fn check_log_header(path: &Path, bytes: &[u8], magic: &[u8; 4], version: u16) -> Result<()> {
    let corrupt = |reason: String| ContainerError::Corrupt {
        path: path.display().to_string(),
        offset: 0,
        reason,
    };
    if bytes.len() < LOG_HEADER {
        return Err(corrupt(format!(
            "{} bytes, too short for a log header",
            bytes.len()
        )));
    }
    if &bytes[..4] != magic {
        return Err(corrupt(format!(
            "bad magic {:?}, expected {:?}",
            String::from_utf8_lossy(&bytes[..4]),
            String::from_utf8_lossy(magic)
        )));
    }
    let v = u16::from_le_bytes([bytes[4], bytes[5]]);
    if v == 0 || v > version {
        return Err(corrupt(format!(
            "unsupported version {v} (this build reads up to {version})"
        )));
    }
    Ok(())
}

/// The name part of this host, for writer and temporary names.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for buf.len() bytes; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "host".into()
    };
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `<host>.<pid>`: the start of this process's writer names.
pub fn claim_base() -> String {
    format!("{}.{}", host_name(), std::process::id())
}

/// The header of an index log.
pub fn index_log_header() -> [u8; LOG_HEADER] {
    log_header(INDEX_MAGIC, INDEX_VERSION)
}

/// Claims a fresh writer name by creating its index log exclusively; returns the
/// name and the open index log (header written).
pub fn claim_writer(dir: &Path) -> Result<(String, File)> {
    // A process never reuses a name it had, even after a compaction removed the log
    // (readers recognise a log they read before by its name and file).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = claim_base();
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{base}.{n}");
        let path = index_path(dir, &name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(&log_header(INDEX_MAGIC, INDEX_VERSION))
                    .map_err(|e| ContainerError::io(&path, e))?;
                return Ok((name, f));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ContainerError::Invalid(format!(
                    "{}: no such container",
                    dir.display()
                )))
            }
            Err(e) => return Err(ContainerError::io(&path, e)),
        }
    }
}

/// Damage when `path` (a log's name) is something else than a regular file: a stray
/// directory or device named like a log holds no writes and is reported, not read.
pub fn not_a_log(path: &Path) -> Option<Damage> {
    let meta = fs::symlink_metadata(path).ok()?;
    (!meta.is_file()).then(|| Damage {
        path: path.to_path_buf(),
        offset: 0,
        reason: "not a regular file; ignored".into(),
        lost_bytes: 0,
    })
}

/// Data logs present without an index log (`(path, bytes)`): their bytes are
/// unreachable — the index that referred to them is gone.
pub fn orphan_data_logs(dir: &Path, writers: &[String]) -> Result<Vec<(PathBuf, u64)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ContainerError::io(dir, e))? {
        let entry = entry.map_err(|e| ContainerError::io(dir, e))?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str().and_then(|n| n.strip_prefix("data.")) else {
            continue;
        };
        if writers.iter().any(|w| w == name) {
            continue;
        }
        let len = entry.metadata().map_or(0, |m| m.len());
        out.push((entry.path(), len));
    }
    out.sort();
    Ok(out)
}

/// Every writer of the container (names, from the index logs present), sorted.
pub fn list_writers(dir: &Path) -> Result<Vec<String>> {
    Ok(list_writers_and(dir, |_| false)?.0)
}

/// [`list_writers`], and whether any other entry's name passes `other`, in one
/// listing.
pub fn list_writers_and(dir: &Path, other: impl Fn(&str) -> bool) -> Result<(Vec<String>, bool)> {
    let mut names = Vec::new();
    let mut found = false;
    for entry in fs::read_dir(dir).map_err(|e| ContainerError::io(dir, e))? {
        let entry = entry.map_err(|e| ContainerError::io(dir, e))?;
        let Some(n) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        match n.strip_prefix("index.") {
            Some(name) => names.push(name.to_string()),
            None => found |= other(&n),
        }
    }
    names.sort();
    Ok((names, found))
}

/// A writer's summary: enough for `stat` without reading any index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterMeta {
    /// Key of the writer's first and last index record (0 before the first flush).
    pub first_key: u64,
    pub last_key: u64,
    /// One past the highest logical byte the writer has written.
    pub end: u64,
    pub writes: u64,
    pub bytes: u64,
    /// Every truncation with a key up to this one is already applied to the writer's
    /// records (a compacted log set); 0 for a writer's own logs. Version 2.
    pub clipped: u64,
    /// Every truncation with a key up to this one is applied to `end` (not to the
    /// records): a writer that lives on across a truncation, or reuses an ended
    /// writer's logs, keeps `stat` exact without reading the index. Version 3.
    pub end_at: u64,
    /// Bytes of the index log up to the end of the last record (0: unknown): a log
    /// of that length ends on a whole record, the one keyed `last_key`. Version 3.
    pub index_len: u64,
}

impl WriterMeta {
    /// Whether `end` accounts for the truncation keyed `key` (the records are clipped
    /// by it, or the end was cut when it happened).
    pub fn end_applies(&self, key: u64) -> bool {
        self.clipped >= key || self.end_at >= key
    }

    /// Cuts `end` to the truncation `t`, ordered after every record of the writer.
    pub fn apply_truncation(&mut self, t: Truncation) {
        self.end = self.end.min(t.size);
        self.end_at = self.end_at.max(t.key);
    }
}

impl WriterMeta {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64);
        for v in [
            self.first_key,
            self.last_key,
            self.end,
            self.writes,
            self.bytes,
            self.clipped,
            self.end_at,
            self.index_len,
        ] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        write_blob(META_MAGIC, META_VERSION, &p)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let (f, len) = Self::open_for_writing(path)?;
        self.write_to(&f, len, path).map(|_| ())
    }

    /// The meta file at `path` opened (created if missing) for [`WriterMeta::write_to`],
    /// with its length.
    pub fn open_for_writing(path: &Path) -> Result<(File, u64)> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| ContainerError::io(path, e))?;
        let len = f.metadata().map_err(|e| ContainerError::io(path, e))?.len();
        Ok((f, len))
    }

    /// Writes the summary over the meta file `f` at `path`, `len` bytes long; returns
    /// its length after.
    pub fn write_to(&self, f: &File, len: u64, path: &Path) -> Result<u64> {
        let blob = self.encode();
        f.write_all_at(&blob, 0)
            .map_err(|e| ContainerError::io(path, e))?;
        // A meta file of another version may be longer: nothing stale may follow.
        if len > blob.len() as u64 {
            f.set_len(blob.len() as u64)
                .map_err(|e| ContainerError::io(path, e))?;
        }
        Ok(blob.len() as u64)
    }

    /// The meta file, or `None` when it is missing or damaged (then the index is
    /// the authority).
    pub fn read(path: &Path) -> Option<Self> {
        let bytes = fs::read(path).ok()?;
        let (version, p) = read_blob(META_MAGIC, META_VERSION, &bytes).ok()?;
        let mut c = Cursor::new(p);
        Some(WriterMeta {
            first_key: c.u64_le().ok()?,
            last_key: c.u64_le().ok()?,
            end: c.u64_le().ok()?,
            writes: c.u64_le().ok()?,
            bytes: c.u64_le().ok()?,
            clipped: if version >= 2 { c.u64_le().ok()? } else { 0 },
            end_at: if version >= 3 { c.u64_le().ok()? } else { 0 },
            index_len: if version >= 3 { c.u64_le().ok()? } else { 0 },
        })
    }
}

/// One truncation: from `key` on, the file is `size` bytes long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub key: u64,
    pub size: u64,
}

/// Appends a truncation record (O_APPEND; durable on return with `sync`, else in the
/// page cache only), holding the shared truncation lock so that a compaction's
/// rewrite of the log cannot drop it.
pub fn append_truncation(dir: &Path, t: Truncation, sync: bool) -> Result<()> {
    let _lock = FileLock::acquire(dir, TRUNCATES_LOCK, LockKind::Shared)?;
    let path = dir.join(TRUNCATES);
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(&path)
        .map_err(|e| ContainerError::io(&path, e))?;
    let mut buf = Vec::new();
    if f.metadata()
        .map_err(|e| ContainerError::io(&path, e))?
        .len()
        == 0
    {
        buf.extend_from_slice(&log_header(TRUNC_MAGIC, TRUNC_VERSION));
    }
    let mut payload = Vec::with_capacity(16);
    payload.extend_from_slice(&t.key.to_le_bytes());
    payload.extend_from_slice(&t.size.to_le_bytes());
    put_frame(&mut buf, &payload);
    f.write_all(&buf)
        .map_err(|e| ContainerError::io(&path, e))?;
    if sync {
        f.sync_all().map_err(|e| ContainerError::io(&path, e))?;
    }
    Ok(())
}

/// A damaged record found while reading: which file, where, and why the rest of that
/// file was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
    /// Bytes of the file from `offset` on that were not used.
    pub lost_bytes: u64,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: byte {}: {} ({} bytes not used)",
            self.path.display(),
            self.offset,
            self.reason,
            self.lost_bytes
        )
    }
}

/// Every intact truncation, sorted by key, and the damage found.
pub fn read_truncations(dir: &Path) -> Result<(Vec<Truncation>, Vec<Damage>)> {
    let path = dir.join(TRUNCATES);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((vec![], vec![])),
        Err(e) => return Err(ContainerError::io(&path, e)),
    };
    check_log_header(&path, &bytes, TRUNC_MAGIC, TRUNC_VERSION)?;
    let (frames, err) = read_frames(&bytes[LOG_HEADER..], LOG_HEADER);
    let mut out = Vec::new();
    let mut damage = Vec::new();
    for (at, payload) in frames {
        if payload.len() != 16 {
            damage.push(Damage {
                path: path.clone(),
                offset: at as u64,
                reason: "truncation record of the wrong size".into(),
                lost_bytes: payload.len() as u64,
            });
            continue;
        }
        let mut c = Cursor::new(payload);
        out.push(Truncation {
            key: c.u64_le().expect("16 bytes"),
            size: c.u64_le().expect("16 bytes"),
        });
    }
    if let Some(e) = err {
        damage.push(frame_damage(&path, bytes.len() as u64, e));
    }
    out.sort_by_key(|t| t.key);
    Ok((out, damage))
}

/// Turns a frame-reading error into a damage report for `path`.
pub fn frame_damage(path: &Path, file_len: u64, e: patio_core::CoreError) -> Damage {
    match e {
        patio_core::CoreError::Corrupt { offset, reason } => Damage {
            path: path.to_path_buf(),
            offset,
            reason,
            lost_bytes: file_len.saturating_sub(offset),
        },
        other => Damage {
            path: path.to_path_buf(),
            offset: 0,
            reason: other.to_string(),
            lost_bytes: file_len,
        },
    }
}

/// Encodes a truncation log holding `ts`, header included.
pub fn encode_truncations(ts: &[Truncation]) -> Vec<u8> {
    let mut buf = log_header(TRUNC_MAGIC, TRUNC_VERSION).to_vec();
    for t in ts {
        let mut payload = Vec::with_capacity(16);
        payload.extend_from_slice(&t.key.to_le_bytes());
        payload.extend_from_slice(&t.size.to_le_bytes());
        put_frame(&mut buf, &payload);
    }
    buf
}

/// Lock file serialising compactions of a container.
pub const COMPACT_LOCK: &str = "lock.compact";
/// Lock file of the truncation log: appends share it, a rewrite holds it alone.
pub const TRUNCATES_LOCK: &str = "lock.truncates";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Shared,
    Exclusive,
    /// Exclusive, or `None` at once when someone else holds it.
    TryExclusive,
}

/// An advisory `flock(2)` on a file of the container, released on drop.
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Locks `dir/name` (created when missing); `Ok(None)` only for
    /// [`LockKind::TryExclusive`] when the lock is taken.
    pub fn try_acquire(dir: &Path, name: &str, kind: LockKind) -> Result<Option<Self>> {
        let path = dir.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(|e| ContainerError::io(&path, e))?;
        Ok(flock(&file, kind)
            .map_err(|e| ContainerError::io(&path, e))?
            .then_some(FileLock { _file: file }))
    }

    /// Locks `dir/name`, waiting for it.
    pub fn acquire(dir: &Path, name: &str, kind: LockKind) -> Result<Self> {
        let kind = if kind == LockKind::TryExclusive {
            LockKind::Exclusive
        } else {
            kind
        };
        Ok(Self::try_acquire(dir, name, kind)?.expect("a waiting lock is always taken"))
    }
}

/// `flock` of an open file; `Ok(false)` when a non-blocking lock is taken elsewhere.
pub fn flock(file: &File, kind: LockKind) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let op = match kind {
        LockKind::Shared => libc::LOCK_SH,
        LockKind::Exclusive => libc::LOCK_EX,
        LockKind::TryExclusive => libc::LOCK_EX | libc::LOCK_NB,
    };
    loop {
        // SAFETY: the descriptor is open for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if kind == LockKind::TryExclusive => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Writes `bytes` to `path` crash-safely: a temporary file beside it, fsync, rename,
/// fsync of the directory.
pub fn replace_file(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".compact.{name}.{}.{}",
        std::process::id(),
        now_ns()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(ContainerError::io(path, e));
    }
    sync_dir(dir)
}
