//! Reading index logs: whole (in parallel threads), from where a previous read
//! stopped, or by share for MPI ranks, which exchange them packed.

use super::WriterLog;
use crate::error::{ContainerError, Result};
use crate::layout::{self, Damage, INDEX_MAGIC, INDEX_VERSION, LOG_HEADER};
use crate::record::{self, Record};
use patio_core::codec::{read_frames, Cursor};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One writer's index log as read: the intact bytes and what was wrong after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogBytes {
    pub writer: String,
    /// Header and intact frames only.
    pub bytes: Vec<u8>,
    /// Size of the file on disk.
    pub disk_bytes: u64,
    pub damage: Vec<Damage>,
}

/// Decodes the records of one log's bytes; a record that fails to decode ends the
/// usable part of the log.
pub(super) fn decode_log(path: &Path, bytes: &[u8]) -> (Vec<Record>, Vec<Damage>) {
    let mut damage = Vec::new();
    if bytes.is_empty() {
        // A writer killed between creating its log and writing the header.
        return (vec![], damage);
    }
    if let Err(e) = layout::check_log_header(path, bytes, INDEX_MAGIC, INDEX_VERSION) {
        damage.push(Damage {
            path: path.to_path_buf(),
            offset: 0,
            reason: e.to_string(),
            lost_bytes: bytes.len() as u64,
        });
        return (vec![], damage);
    }
    let (frames, err) = read_frames(&bytes[LOG_HEADER..], LOG_HEADER);
    let mut records = Vec::with_capacity(frames.len());
    for (at, payload) in frames {
        match record::decode(path, at, payload) {
            Ok(r) => records.push(r),
            Err(e) => {
                damage.push(Damage {
                    path: path.to_path_buf(),
                    offset: at as u64 - 8,
                    reason: e.to_string(),
                    lost_bytes: bytes.len() as u64 - (at as u64 - 8),
                });
                return (records, damage);
            }
        }
    }
    if let Some(e) = err {
        damage.push(layout::frame_damage(path, bytes.len() as u64, e));
    }
    (records, damage)
}

/// Index logs a thread of [`parallel_map`] takes at least.
const PER_THREAD_MIN: usize = 8;

/// Runs `f` over `items` on a few threads, keeping the order; the first error wins.
pub(super) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    // Asking for the parallelism reads cgroup files: once per process.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    // A few logs (a small file's) are read faster than threads start.
    let threads = cores
        .clamp(1, 16)
        .min(items.len().div_ceil(PER_THREAD_MIN).max(1));
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads).max(1);
    let f = &f;
    let parts: Vec<Result<Vec<R>>> = std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|share| s.spawn(move || share.iter().map(f).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("index log reader thread panicked"))
            .collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// Reads and decodes one writer's index log (`None` when it is gone).
pub(super) fn load_log(dir: &Path, name: &str) -> Result<Option<(WriterLog, Vec<Damage>)>> {
    use std::os::unix::fs::MetadataExt;
    let path = layout::index_path(dir, name);
    let file = fs::metadata(&path).ok().map(|m| (m.dev(), m.ino()));
    let Some((bytes, stray)) = read_index_log(&path)? else {
        return Ok(None);
    };
    let (records, mut damage) = decode_log(&path, &bytes);
    let records: Vec<Arc<Record>> = records.into_iter().map(Arc::new).collect();
    damage.extend(stray);
    let same = fs::metadata(&path).ok().map(|m| (m.dev(), m.ino())) == file;
    Ok(Some((
        WriterLog {
            name: name.to_string(),
            records,
            disk_bytes: bytes.len() as u64,
            file,
            clean: damage.is_empty() && same && !bytes.is_empty(),
        },
        damage,
    )))
}

/// `old`'s log with what was appended to it since it was read; `None` when the log
/// is another file now (or gone, or shorter), to be read whole.
pub(super) fn extend_log(dir: &Path, old: &WriterLog) -> Result<Option<(WriterLog, Vec<Damage>)>> {
    use std::os::unix::fs::MetadataExt;
    let path = layout::index_path(dir, &old.name);
    // Logs only grow: the same file of the same length is the log as read.
    if let (Some((dev, ino, len)), Some(file)) = (file_identity(&path), old.file) {
        if (dev, ino) == file && len == old.disk_bytes {
            return Ok(Some((old.clone(), Vec::new())));
        }
    }
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ContainerError::io(&path, e)),
    };
    let m = f.metadata().map_err(|e| ContainerError::io(&path, e))?;
    if old.file != Some((m.dev(), m.ino())) || !m.is_file() || m.len() < old.disk_bytes {
        return Ok(None);
    }
    let mut tail = vec![0u8; (m.len() - old.disk_bytes) as usize];
    let mut done = 0;
    while done < tail.len() {
        match f.read_at(&mut tail[done..], old.disk_bytes + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ContainerError::io(&path, e)),
        }
    }
    tail.truncate(done);
    let mut records = old.records.clone();
    let mut damage = Vec::new();
    let base = old.disk_bytes as usize;
    let total = old.disk_bytes + tail.len() as u64;
    let (frames, err) = read_frames(&tail, base);
    for (at, payload) in frames {
        match record::decode(&path, at, payload) {
            Ok(r) => records.push(Arc::new(r)),
            Err(e) => {
                damage.push(Damage {
                    path: path.clone(),
                    offset: at as u64 - 8,
                    reason: e.to_string(),
                    lost_bytes: total - (at as u64 - 8),
                });
                break;
            }
        }
    }
    if damage.is_empty() {
        if let Some(e) = err {
            damage.push(layout::frame_damage(&path, total, e));
        }
    }
    Ok(Some((
        WriterLog {
            name: old.name.clone(),
            records,
            disk_bytes: total,
            file: old.file,
            clean: damage.is_empty(),
        },
        damage,
    )))
}

/// `(device, inode, length)` of the regular file at `path` (`None`: not there).
pub(super) fn file_identity(path: &Path) -> Option<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino(), m.len()))
}

/// The bytes of an index log (`None` when it is gone: removed by a compaction); a
/// path named like one that is not a regular file (a stray directory) reads as an
/// empty log with its damage.
pub(super) fn read_index_log(path: &Path) -> Result<Option<(Vec<u8>, Option<Damage>)>> {
    if let Some(d) = layout::not_a_log(path) {
        return Ok(Some((Vec::new(), Some(d))));
    }
    match fs::read(path) {
        Ok(bytes) => Ok(Some((bytes, None))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ContainerError::io(path, e)),
    }
}

/// Reads the named index logs (one rank's share), keeping each log's intact prefix
/// and reporting the rest.
pub fn read_logs(dir: &Path, names: &[String]) -> Result<Vec<LogBytes>> {
    parallel_map(names, |name| {
        let path = layout::index_path(dir, name);
        let (mut bytes, stray) = read_index_log(&path)?.ok_or_else(|| {
            ContainerError::io(&path, std::io::Error::from(std::io::ErrorKind::NotFound))
        })?;
        let disk_bytes = bytes.len() as u64;
        let (_, mut damage) = decode_log(&path, &bytes);
        damage.extend(stray);
        if let Some(d) = damage.first() {
            bytes.truncate(if d.offset < LOG_HEADER as u64 {
                0
            } else {
                d.offset as usize
            });
        }
        Ok(LogBytes {
            writer: name.clone(),
            bytes,
            disk_bytes,
            damage,
        })
    })
}

/// Packs logs for exchange between processes (MPI all-gather).
pub fn pack_logs(logs: &[LogBytes]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"PLGS");
    out.extend_from_slice(&(logs.len() as u64).to_le_bytes());
    for l in logs {
        out.extend_from_slice(&(l.writer.len() as u64).to_le_bytes());
        out.extend_from_slice(l.writer.as_bytes());
        out.extend_from_slice(&l.disk_bytes.to_le_bytes());
        out.extend_from_slice(&(l.bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&l.bytes);
        out.extend_from_slice(&(l.damage.len() as u64).to_le_bytes());
        for d in &l.damage {
            let p = d.path.to_string_lossy();
            out.extend_from_slice(&(p.len() as u64).to_le_bytes());
            out.extend_from_slice(p.as_bytes());
            out.extend_from_slice(&d.offset.to_le_bytes());
            out.extend_from_slice(&d.lost_bytes.to_le_bytes());
            out.extend_from_slice(&(d.reason.len() as u64).to_le_bytes());
            out.extend_from_slice(d.reason.as_bytes());
        }
    }
    out
}

/// The inverse of [`pack_logs`].
pub fn unpack_logs(bytes: &[u8]) -> Result<Vec<LogBytes>> {
    let fail = |e: patio_core::CoreError| ContainerError::in_file("packed index logs", e);
    let mut c = Cursor::new(bytes);
    if c.take(4).map_err(fail)? != b"PLGS" {
        return Err(ContainerError::Invalid(
            "packed index logs: bad magic".into(),
        ));
    }
    let text = |c: &mut Cursor| -> Result<String> {
        let n = c.u64_le().map_err(fail)?;
        if n > c.remaining() as u64 {
            return Err(fail(c.error("string longer than the input")));
        }
        Ok(String::from_utf8_lossy(c.take(n as usize).map_err(fail)?).into_owned())
    };
    let n = c.u64_le().map_err(fail)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let writer = text(&mut c)?;
        let disk_bytes = c.u64_le().map_err(fail)?;
        let len = c.u64_le().map_err(fail)?;
        if len > c.remaining() as u64 {
            return Err(fail(c.error("log longer than the input")));
        }
        let log = c.take(len as usize).map_err(fail)?.to_vec();
        let nd = c.u64_le().map_err(fail)?;
        let mut damage = Vec::new();
        for _ in 0..nd.min(1 << 20) {
            let path = PathBuf::from(text(&mut c)?);
            let offset = c.u64_le().map_err(fail)?;
            let lost_bytes = c.u64_le().map_err(fail)?;
            let reason = text(&mut c)?;
            damage.push(Damage {
                path,
                offset,
                reason,
                lost_bytes,
            });
        }
        out.push(LogBytes {
            writer,
            bytes: log,
            disk_bytes,
            damage,
        });
    }
    if !c.is_at_end() {
        return Err(fail(c.error("trailing bytes")));
    }
    Ok(out)
}
