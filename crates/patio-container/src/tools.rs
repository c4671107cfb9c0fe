//! Whole-container operations: `stat` from the meta files alone (no index read in
//! the common case), truncate, remove, a full check of every record, and flatten
//! into a plain file.

use crate::error::{ContainerError, Result};
use crate::layout::{self, Damage, WriterMeta, INDEX_MAGIC, INDEX_VERSION, LOG_HEADER};
use crate::reader::Reader;
use crate::record::{self, Columns};
use patio_core::codec::read_frames;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Size and modification time of a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuickStat {
    pub size: u64,
    pub mtime_ns: u64,
    /// True when the size came from the meta files alone.
    pub from_meta: bool,
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
    for name in layout::list_writers(dir)? {
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
            Some(t) if meta.first_key <= t.key => exact = false,
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
    })
}

/// Truncates (or extends with a hole) the logical file to `size`. Ordered after
/// every write flushed before the call; the caller flushes its own writers first.
pub fn truncate(dir: &Path, size: u64) -> Result<()> {
    layout::read_marker(dir)?;
    if size > i64::MAX as u64 {
        return Err(ContainerError::Invalid(format!(
            "size {size} is beyond 2^63-1"
        )));
    }
    layout::append_truncation(
        dir,
        layout::Truncation {
            key: layout::now_ns(),
            size,
        },
    )
}

/// Removes the container (refuses directories that are not containers).
pub fn remove(dir: &Path) -> Result<()> {
    layout::read_marker(dir)?;
    fs::remove_dir_all(dir).map_err(|e| ContainerError::io(dir, e))
}

/// What a full check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub logs: u64,
    pub records: u64,
    pub writes: u64,
    pub damage: Vec<Damage>,
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
    for name in layout::list_writers(dir)? {
        report.logs += 1;
        let path = layout::index_path(dir, &name);
        let bytes = fs::read(&path).map_err(|e| ContainerError::io(&path, e))?;
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
        let data_path = layout::data_path(dir, &name);
        let data_len = fs::metadata(&data_path).map_or(0, |m| m.len());
        let (frames, err) = read_frames(&bytes[LOG_HEADER..], LOG_HEADER);
        for (at, payload) in frames {
            let lost = bytes.len() as u64 - (at as u64 - 8);
            match record::decode(&path, at, payload) {
                Ok(r) => {
                    report.records += 1;
                    report.writes += r.writes;
                    let data_end = data_end(&r.columns);
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

/// Writes the logical file as a plain file at `out`; returns its size.
pub fn flatten(dir: &Path, out: &Path, mut progress: impl FnMut(u64, u64)) -> Result<u64> {
    let reader = Reader::open(dir)?;
    let size = reader.size();
    let mut file = fs::File::create(out).map_err(|e| ContainerError::io(out, e))?;
    let mut buf = vec![0u8; 8 << 20];
    let mut at = 0u64;
    while at < size {
        let n = reader.read_at(&mut buf, at)?;
        file.write_all(&buf[..n])
            .map_err(|e| ContainerError::io(out, e))?;
        at += n as u64;
        progress(at, size);
    }
    file.sync_all().map_err(|e| ContainerError::io(out, e))?;
    Ok(size)
}
