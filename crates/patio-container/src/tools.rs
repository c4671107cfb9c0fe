//! Whole-container operations: `stat` from the meta files alone (no index read in
//! the common case), truncate, remove, a full check of every record, and flatten
//! into a plain file.

use crate::error::{ContainerError, Result};
use crate::layout::{self, Damage, WriterMeta, INDEX_MAGIC, INDEX_VERSION, LOG_HEADER};
use crate::reader::Reader;
use crate::record::{self, Columns};
use patio_core::codec::read_frames;
use std::fs;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Size and modification time of a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuickStat {
    pub size: u64,
    pub mtime_ns: u64,
    /// True when the size came from the meta files alone.
    pub from_meta: bool,
    /// Bytes the writers' data and index logs occupy on disk (allocated blocks, so
    /// holes of the logical file cost nothing).
    pub disk_bytes: u64,
}

/// Size and mtime from the writers' meta files and the truncation log. Falls back to
/// reading the index when a meta file is missing or damaged, or a writer's records
/// straddle the last truncation.
pub fn stat(dir: &Path) -> Result<QuickStat> {
    layout::read_marker(dir)?;
    let marker_time = fs::metadata(dir.join(layout::MARKER))
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    let (truncations, _) = layout::read_truncations(dir)?;
    let last = truncations.last().copied();
    let mut size = last.map_or(0, |t| t.size);
    let mut mtime = marker_time.max(last.map_or(0, |t| t.key));
    let mut exact = true;
    let mut disk_bytes = 0u64;
    for name in layout::list_writers(dir)? {
        for log in [
            layout::data_path(dir, &name),
            layout::index_path(dir, &name),
        ] {
            disk_bytes += fs::metadata(&log).map_or(0, |m| {
                use std::os::unix::fs::MetadataExt;
                m.blocks() * 512
            });
        }
        let meta = match WriterMeta::read(&layout::meta_path(dir, &name)) {
            Some(m) => m,
            None => {
                // No meta: a writer that never flushed (its index is empty) or a
                // damaged file. Only an index with records needs the slow path.
                let len = fs::metadata(layout::index_path(dir, &name)).map_or(0, |m| m.len());
                if len > LOG_HEADER as u64 {
                    exact = false;
                }
                continue;
            }
        };
        if meta.last_key == 0 {
            continue;
        }
        mtime = mtime.max(meta.last_key);
        match last {
            Some(t) if meta.last_key < t.key => {}
            Some(t) if meta.first_key <= t.key && !meta.end_applies(t.key) => exact = false,
            _ => size = size.max(meta.end),
        }
    }
    if !exact {
        size = Reader::open(dir)?.size();
    }
    Ok(QuickStat {
        size,
        mtime_ns: mtime,
        from_meta: exact,
        disk_bytes,
    })
}

/// Truncates (or extends with a hole) the logical file to `size`. Ordered after
/// every write flushed before the call; the caller flushes its own writers first.
pub fn truncate(dir: &Path, size: u64) -> Result<()> {
    layout::read_marker(dir)?;
    truncate_with(dir, size, true, 0).map(|_| ())
}

/// [`truncate`], durable on return only with `sync` (without it the record survives
/// the process being killed, not the machine crashing, until [`sync`]), keyed after
/// `after` (the newest record key the caller knows of), in `dir`, which the caller
/// knows to be a container; returns the truncation record.
pub fn truncate_with(dir: &Path, size: u64, sync: bool, after: u64) -> Result<layout::Truncation> {
    if size > i64::MAX as u64 {
        return Err(ContainerError::Invalid(format!(
            "size {size} is beyond 2^63-1"
        )));
    }
    let t = layout::Truncation {
        key: layout::now_ns().max(after.saturating_add(1)),
        size,
    };
    layout::append_truncation(dir, t, sync)?;
    Ok(t)
}

/// Makes everything written to the container so far durable: syncs every file in
/// its directory (logs, meta files, truncation log), then the directory. For
/// writers that do not sync on flush ([`crate::Writer::set_sync_on_flush`]).
pub fn sync(dir: &Path) -> Result<()> {
    layout::read_marker(dir)?;
    let entries = fs::read_dir(dir).map_err(|e| ContainerError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ContainerError::io(dir, e))?;
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        match fs::File::open(&path).and_then(|f| f.sync_all()) {
            Ok(()) => {}
            // A compaction may remove a log it replaced while we list.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ContainerError::io(&path, e)),
        }
    }
    layout::sync_dir(dir)
}

/// Removes the container (refuses directories that are not containers). Waits for a
/// compaction running on it, so that none adds files while the directory goes.
pub fn remove(dir: &Path) -> Result<()> {
    layout::read_marker(dir)?;
    let _lock = layout::FileLock::acquire(dir, layout::COMPACT_LOCK, layout::LockKind::Exclusive)?;
    fs::remove_dir_all(dir).map_err(|e| ContainerError::io(dir, e))
}

/// What a full check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub logs: u64,
    pub records: u64,
    pub writes: u64,
    pub damage: Vec<Damage>,
    /// Data-log bytes after the last byte any record of their writer refers to: the
    /// unflushed tail of a writer that stopped without flushing (never acknowledged,
    /// so not damage), summed over writers.
    pub unindexed_tail_bytes: u64,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty()
    }
}

/// Verifies every index record (checksum, decoding, bounds) and that each record's
/// data lies inside its writer's data log.
pub fn check(dir: &Path) -> Result<CheckReport> {
    layout::read_marker(dir)?;
    let mut report = CheckReport::default();
    let (_, damage) = layout::read_truncations(dir)?;
    report.damage.extend(damage);
    let writers = layout::list_writers(dir)?;
    for (path, len) in layout::orphan_data_logs(dir, &writers)? {
        report.damage.push(Damage {
            path,
            offset: 0,
            reason: "data log without an index log: its bytes are unreachable".into(),
            lost_bytes: len,
        });
    }
    for name in writers {
        report.logs += 1;
        let path = layout::index_path(dir, &name);
        if let Some(d) = layout::not_a_log(&path) {
            report.damage.push(d);
            continue;
        }
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                report.damage.push(Damage {
                    path: path.clone(),
                    offset: 0,
                    reason: format!("cannot read the index log: {e}"),
                    lost_bytes: 0,
                });
                continue;
            }
        };
        let data_path = layout::data_path(dir, &name);
        if let Err(e) = fs::File::open(&data_path) {
            if e.kind() != std::io::ErrorKind::NotFound || bytes.len() > LOG_HEADER {
                report.damage.push(Damage {
                    path: data_path.clone(),
                    offset: 0,
                    reason: format!("cannot read the data log: {e}"),
                    lost_bytes: 0,
                });
            }
        }
        if bytes.is_empty() {
            continue;
        }
        if let Err(e) = layout::check_log_header(&path, &bytes, INDEX_MAGIC, INDEX_VERSION) {
            report.damage.push(Damage {
                path: path.clone(),
                offset: 0,
                reason: e.to_string(),
                lost_bytes: bytes.len() as u64,
            });
            continue;
        }
        let data_len = fs::metadata(&data_path).map_or(0, |m| m.len());
        let mut indexed_end = 0u64;
        let (frames, err) = read_frames(&bytes[LOG_HEADER..], LOG_HEADER);
        for (at, payload) in frames {
            let lost = bytes.len() as u64 - (at as u64 - 8);
            match record::decode(&path, at, payload) {
                Ok(r) => {
                    report.records += 1;
                    report.writes += r.writes;
                    let data_end = data_end(&r.columns);
                    indexed_end = indexed_end.max(data_end);
                    if data_end > data_len {
                        report.damage.push(Damage {
                            path: data_path.clone(),
                            offset: data_len,
                            reason: format!(
                                "index record at byte {} of {} refers to data up to byte {data_end}",
                                at - 8,
                                path.display()
                            ),
                            lost_bytes: data_end - data_len,
                        });
                    }
                }
                Err(e) => {
                    report.damage.push(Damage {
                        path: path.clone(),
                        offset: at as u64 - 8,
                        reason: e.to_string(),
                        lost_bytes: lost,
                    });
                    break;
                }
            }
        }
        if let Some(e) = err {
            report
                .damage
                .push(layout::frame_damage(&path, bytes.len() as u64, e));
        }
        report.unindexed_tail_bytes += data_len.saturating_sub(indexed_end);
    }
    Ok(report)
}

/// One past the last data-log byte a record refers to.
fn data_end(c: &Columns) -> u64 {
    match c {
        Columns::Raw(v) => v.iter().map(|e| e.physical + e.length).max().unwrap_or(0),
        Columns::Pattern { .. } => (0..c.len())
            .map(|i| {
                let e = c.get(i);
                e.physical + e.length
            })
            .max()
            .unwrap_or(0),
    }
}

/// What [`flatten`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flattened {
    /// The logical size (the output's size).
    pub size: u64,
    /// Bytes of data written; the rest of the output is holes.
    pub data_bytes: u64,
    /// Index damage found (only with `force`: otherwise flatten refuses).
    pub damage: Vec<Damage>,
}

/// Data bytes (not holes) of the logical file, by walking the index.
fn mapped_bytes(reader: &Reader) -> u64 {
    let size = reader.size();
    let (mut x, mut bytes) = (0u64, 0u64);
    while x < size {
        match reader.lookup(x) {
            patio_core::Lookup::Data { len, .. } => {
                let n = len.min(size - x);
                bytes += n;
                x += n;
            }
            patio_core::Lookup::Hole { len } => x += len.max(1),
            patio_core::Lookup::Unmapped => break,
        }
    }
    bytes
}

/// Free bytes for an unprivileged writer on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value, and the path is a
    // valid NUL-terminated string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0)
        .then(|| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Writes the logical file as a plain file at `out` (replacing it): a sparse file
/// whose holes are the container's, written under a temporary name beside `out`,
/// synced and renamed. Refuses a damaged container (lost writes would read as zeros)
/// unless `force`, a size the target file system cannot hold and data that does not
/// fit in its free space. `progress(done, total)` counts data bytes.
pub fn flatten(
    dir: &Path,
    out: &Path,
    force: bool,
    mut progress: impl FnMut(u64, u64),
) -> Result<Flattened> {
    let reader = Reader::open(dir)?;
    let damage = reader.damage().to_vec();
    if !damage.is_empty() && !force {
        let first = &damage[0];
        return Err(ContainerError::Invalid(format!(
            "{}: damaged in {} place(s) (first: {} at byte {}: {}); its lost writes would \
             read as zeros: see `patio container check`, or force",
            dir.display(),
            damage.len(),
            first.path.display(),
            first.offset,
            first.reason
        )));
    }
    let size = reader.size();
    let data_bytes = mapped_bytes(&reader);
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if let Some(free) = free_bytes(&parent) {
        if free < data_bytes {
            return Err(ContainerError::Invalid(format!(
                "{}: needs {data_bytes} bytes of space, {free} free on its file system",
                out.display()
            )));
        }
    }
    let name = out
        .file_name()
        .map_or_else(|| "flatten".into(), |n| n.to_string_lossy().into_owned());
    let tmp = parent.join(format!(
        ".{name}.flatten-{}-{}",
        std::process::id(),
        layout::now_ns()
    ));
    let result = write_sparse(&reader, &tmp, size, data_bytes, &mut progress)
        .and_then(|()| fs::rename(&tmp, out).map_err(|e| ContainerError::io(out, e)))
        .and_then(|()| layout::sync_dir(&parent));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    Ok(Flattened {
        size,
        data_bytes,
        damage,
    })
}

fn write_sparse(
    reader: &Reader,
    tmp: &Path,
    size: u64,
    data_bytes: u64,
    progress: &mut impl FnMut(u64, u64),
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| ContainerError::io(tmp, e))?;
    file.set_len(size).map_err(|e| {
        if e.raw_os_error() == Some(libc::EFBIG) {
            ContainerError::Invalid(format!(
                "{}: its file system cannot hold a file of {size} bytes",
                tmp.parent().unwrap_or(tmp).display()
            ))
        } else {
            ContainerError::io(tmp, e)
        }
    })?;
    let mut buf = vec![0u8; 8 << 20];
    let (mut x, mut done) = (0u64, 0u64);
    while x < size {
        match reader.lookup(x) {
            patio_core::Lookup::Data { len, .. } => {
                let n = len.min(size - x).min(buf.len() as u64) as usize;
                let got = reader.read_at(&mut buf[..n], x)?;
                file.write_all_at(&buf[..got], x)
                    .map_err(|e| ContainerError::io(tmp, e))?;
                x += got as u64;
                done += got as u64;
                progress(done, data_bytes);
            }
            patio_core::Lookup::Hole { len } => x += len.max(1),
            patio_core::Lookup::Unmapped => break,
        }
    }
    file.sync_all().map_err(|e| ContainerError::io(tmp, e))
}
