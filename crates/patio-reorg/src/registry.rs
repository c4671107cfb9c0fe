//! The registration of a reorganized container for its source file: a small file
//! `.<name>.patio-reorg` beside the source (so every process on every node of a shared
//! file system, and a mount that re-exports the directory, finds it from the source's
//! path alone). It names the container (relative to the source's directory when the
//! container is inside it, so the pair can be moved or mounted together; else
//! absolute) and the source's [`FileVersion`] the container was built from. Whether a
//! registration is served is decided once, here ([`resolve`]): the source must still
//! be that version and the container must open whole, with the source's size.
//! Format: docs/FORMATS.md, "Reorganization registration".

use crate::error::{ReorgError, Result};
use patio_container::Reader;
use patio_core::codec::{read_blob, write_blob, Cursor};
use patio_core::FileVersion;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Magic and version of the registration blob.
const MAGIC: &[u8; 4] = b"PREG";
const VERSION: u16 = 1;
/// Suffix of a registration's name (`.<name>.patio-reorg`).
pub const SUFFIX: &str = ".patio-reorg";
/// Longest container path a registration holds.
const MAX_PATH: usize = 4096;

/// One registration as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The registration file.
    pub path: PathBuf,
    /// The container, resolved against the source's directory when stored relative.
    pub container: PathBuf,
    /// Whether the container is stored relative to the source's directory.
    pub relative: bool,
    /// The source's version the container was built from (or checked against).
    pub version: FileVersion,
    /// When it was registered, nanoseconds since the Unix epoch.
    pub created_ns: u64,
}

/// The directory a path's file is in (`.` for a bare name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The registration file for `source`: `.<name>.patio-reorg` in its directory.
pub fn registration_path(source: &Path) -> Result<PathBuf> {
    let name = source
        .file_name()
        .ok_or_else(|| ReorgError::io(source, std::io::Error::other("no file name")))?;
    let mut reg = b".".to_vec();
    reg.extend_from_slice(name.as_bytes());
    reg.extend_from_slice(SUFFIX.as_bytes());
    Ok(source.with_file_name(std::ffi::OsString::from_vec(reg)))
}

fn corrupt(path: &Path, reason: impl Into<String>) -> ReorgError {
    ReorgError::BadRegistration {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The registration's bytes (the payload inside a checksummed blob).
fn encode(stored: &Path, relative: bool, version: &FileVersion, created_ns: u64) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&version.dev.to_le_bytes());
    p.extend_from_slice(&version.ino.to_le_bytes());
    p.extend_from_slice(&version.size.to_le_bytes());
    p.extend_from_slice(&version.mtime_ns.to_le_bytes());
    p.extend_from_slice(&version.ctime_ns.to_le_bytes());
    p.extend_from_slice(&created_ns.to_le_bytes());
    p.push(u8::from(relative));
    let bytes = stored.as_os_str().as_bytes();
    p.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    p.extend_from_slice(bytes);
    write_blob(MAGIC, VERSION, &p)
}

/// Decodes the registration file `path` of `source`.
fn decode(path: &Path, source: &Path, bytes: &[u8]) -> Result<Registration> {
    let (_, payload) =
        read_blob(MAGIC, VERSION, bytes).map_err(|e| corrupt(path, e.to_string()))?;
    let mut c = Cursor::new(payload);
    let mut fields = || -> patio_core::Result<_> {
        let dev = c.u64_le()?;
        let ino = c.u64_le()?;
        let size = c.u64_le()?;
        let mtime_ns = i128::from_le_bytes(c.take(16)?.try_into().expect("16 bytes"));
        let ctime_ns = i128::from_le_bytes(c.take(16)?.try_into().expect("16 bytes"));
        let created_ns = c.u64_le()?;
        let relative = c.u8()?;
        let len = c.u32_le()? as usize;
        let stored = c.take(len.min(MAX_PATH + 1))?.to_vec();
        let version = FileVersion {
            dev,
            ino,
            size,
            mtime_ns,
            ctime_ns,
        };
        Ok((version, created_ns, relative, len, stored))
    };
    let (version, created_ns, relative, len, stored) =
        fields().map_err(|e| corrupt(path, e.to_string()))?;
    if !c.is_at_end() {
        return Err(corrupt(path, "trailing bytes after the container path"));
    }
    if relative > 1 {
        return Err(corrupt(path, format!("unknown path kind {relative}")));
    }
    if len == 0 || len > MAX_PATH || stored.contains(&0) {
        return Err(corrupt(
            path,
            "the container path is empty, too long or holds a NUL",
        ));
    }
    let stored = PathBuf::from(std::ffi::OsString::from_vec(stored));
    let relative = relative == 1;
    if relative != stored.is_relative() {
        return Err(corrupt(path, "the container path's kind does not match it"));
    }
    let container = if relative {
        source.with_file_name(&stored)
    } else {
        stored
    };
    Ok(Registration {
        path: path.to_path_buf(),
        container,
        relative,
        version,
        created_ns,
    })
}

/// How a registration stores `container` for a source in `dir`: relative when the
/// container is inside `dir` (both resolved), else absolute.
fn stored_path(dir: &Path, container: &Path) -> Result<(PathBuf, bool)> {
    let dir = std::fs::canonicalize(dir).map_err(|e| ReorgError::io(dir, e))?;
    let c = std::fs::canonicalize(container).map_err(|e| ReorgError::io(container, e))?;
    match c.strip_prefix(&dir) {
        Ok(rel) if rel.components().all(|p| matches!(p, Component::Normal(_))) => {
            if rel.as_os_str().is_empty() {
                return Err(ReorgError::io(
                    container,
                    std::io::Error::other("is the source's own directory"),
                ));
            }
            Ok((rel.to_path_buf(), true))
        }
        _ => Ok((c, false)),
    }
}

/// Removes the temporary files killed registrations on this host left beside the
/// registration `path` (`.NAME.patio-reorg.tmp-HOST.PID-NS`, their process gone).
fn remove_leftovers(path: &Path) {
    let mut prefix = path.file_name().expect("has a name").as_bytes().to_vec();
    prefix.extend_from_slice(format!(".tmp-{}.", patio_container::layout::host_name()).as_bytes());
    let Ok(entries) = std::fs::read_dir(directory_of(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.as_bytes().strip_prefix(prefix.as_slice()) else {
            continue;
        };
        let pid = std::str::from_utf8(rest)
            .ok()
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| !crate::apply::process_alive(p)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Registers `container` for `source`, recording `version` (what the container was
/// built from or checked against). Replaces an earlier registration atomically
/// (written under a temporary name, synced, renamed, the directory synced).
pub fn register(source: &Path, container: &Path, version: &FileVersion) -> Result<Registration> {
    let path = registration_path(source)?;
    let dir = directory_of(source);
    let (stored, relative) = stored_path(&dir, container)?;
    if stored.as_os_str().len() > MAX_PATH {
        return Err(ReorgError::io(
            container,
            std::io::Error::other(format!("path longer than {MAX_PATH} bytes")),
        ));
    }
    let created_ns = now_ns();
    let bytes = encode(&stored, relative, version, created_ns);
    remove_leftovers(&path);
    let tmp = {
        let mut name = path.file_name().expect("has a name").to_os_string();
        name.push(format!(
            ".tmp-{}-{}",
            patio_container::layout::claim_base(),
            created_ns
        ));
        path.with_file_name(name)
    };
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(ReorgError::io(&path, e));
    }
    patio_container::layout::sync_dir(&dir)?;
    decode(&path, source, &bytes)
}

/// Where `source`'s registration is: beside the path as given, or, when there is none
/// and the path is a symbolic link, beside the file it resolves to. `(registration,
/// the path it is for, its bytes)`; one failed open when there is none (and no link).
fn find(source: &Path) -> Result<Option<(PathBuf, PathBuf, Vec<u8>)>> {
    let read = |src: &Path| -> Result<Option<(PathBuf, PathBuf, Vec<u8>)>> {
        let path = registration_path(src)?;
        match std::fs::read(&path) {
            Ok(b) => Ok(Some((path, src.to_path_buf(), b))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ReorgError::io(&path, e)),
        }
    };
    if let Some(found) = read(source)? {
        return Ok(Some(found));
    }
    if !std::fs::symlink_metadata(source).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(None);
    }
    match std::fs::canonicalize(source) {
        Ok(target) => read(&target),
        Err(_) => Ok(None),
    }
}

/// The registration for `source`, if any (beside the path as given, else beside the
/// file a symbolic link `source` resolves to).
pub fn lookup(source: &Path) -> Result<Option<Registration>> {
    match find(source)? {
        None => Ok(None),
        Some((path, src, bytes)) => decode(&path, &src, &bytes).map(Some),
    }
}

/// Removes the registration for `source` (found as [`lookup`] finds it); `false`
/// when there was none.
pub fn unregister(source: &Path) -> Result<bool> {
    let Some((path, src, _)) = find(source)? else {
        return Ok(false);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {
            patio_container::layout::sync_dir(&directory_of(&src))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ReorgError::io(&path, e)),
    }
}

/// What looking a source up for serving found.
pub enum Resolved {
    /// No registration.
    NotRegistered,
    /// A registration that is not served, and why (one line naming the file).
    Bypassed {
        registration: Option<Registration>,
        reason: String,
        /// Whether the source is still the recorded version.
        source_matches: bool,
    },
    /// Registered and current: the container, open.
    Served {
        registration: Registration,
        reader: Box<Reader>,
    },
}

/// Why the registered container cannot serve (missing, damaged, another size).
fn container_problem(reg: &Registration) -> std::result::Result<Reader, String> {
    let c = reg.container.display();
    let reader = Reader::open(&reg.container).map_err(|e| format!("container {c}: {e}"))?;
    if let Some(d) = reader.damage().first() {
        return Err(format!("container {c} is damaged: {d}"));
    }
    if reader.size() != reg.version.size {
        return Err(format!(
            "container {c} holds {} bytes, the source {}",
            reader.size(),
            reg.version.size
        ));
    }
    Ok(reader)
}

/// Decides whether `source` is served from a registered container: the one rule the
/// C ABI, `patio reorg status` and every front end follow. A corrupt registration is
/// bypassed (never served); an I/O error reading it is an error.
pub fn resolve(source: &Path) -> Result<Resolved> {
    let reg = match lookup(source) {
        Ok(None) => return Ok(Resolved::NotRegistered),
        Ok(Some(r)) => r,
        Err(e @ ReorgError::BadRegistration { .. }) => {
            return Ok(Resolved::Bypassed {
                registration: None,
                reason: e.to_string(),
                source_matches: false,
            })
        }
        Err(e) => return Err(e),
    };
    let s = source.display();
    let difference = match FileVersion::of(source) {
        Ok(now) => now.difference(&reg.version),
        Err(e) => Some(format!("cannot be read ({e})")),
    };
    if let Some(what) = difference {
        return Ok(Resolved::Bypassed {
            reason: format!(
                "{s}: not the version {} was built from: {what}",
                reg.container.display()
            ),
            registration: Some(reg),
            source_matches: false,
        });
    }
    match container_problem(&reg) {
        Ok(reader) => Ok(Resolved::Served {
            registration: reg,
            reader: Box::new(reader),
        }),
        Err(why) => Ok(Resolved::Bypassed {
            reason: format!("{s}: {why}"),
            registration: Some(reg),
            source_matches: true,
        }),
    }
}

/// What `patio reorg status` reports for a registered source.
#[derive(Clone, Debug)]
pub struct Status {
    pub registration: Option<Registration>,
    /// The source is still the version the container was built from.
    pub source_matches: bool,
    /// Reads of the source are served from the container.
    pub served: bool,
    /// Why it is not served.
    pub reason: Option<String>,
    /// Global patterns of the container's merged index (tiles plus pattern entries:
    /// the size of the remap as a pattern map), when it opened.
    pub patterns: Option<u64>,
    /// Index records and index bytes on disk (the remap as stored), when it opened.
    pub index_records: Option<u64>,
    pub index_bytes: Option<u64>,
}

/// The status of `source`'s registration; `None` when it has none.
/// A corrupt registration is an error here (naming it), not a status.
pub fn status(source: &Path) -> Result<Option<Status>> {
    if lookup(source)?.is_none() {
        return Ok(None);
    }
    Ok(match resolve(source)? {
        Resolved::NotRegistered => None,
        Resolved::Served {
            registration,
            reader,
        } => {
            let s = reader.stats();
            Some(Status {
                registration: Some(registration),
                source_matches: true,
                served: true,
                reason: None,
                patterns: Some(s.index.global_patterns),
                index_records: Some(s.records),
                index_bytes: Some(s.index_disk_bytes),
            })
        }
        Resolved::Bypassed {
            registration,
            reason,
            source_matches,
        } => {
            let reader = registration
                .as_ref()
                .and_then(|r| Reader::open(&r.container).ok());
            let s = reader.as_ref().map(|r| r.stats());
            Some(Status {
                registration,
                source_matches,
                served: false,
                reason: Some(reason),
                patterns: s.map(|s| s.index.global_patterns),
                index_records: s.map(|s| s.records),
                index_bytes: s.map(|s| s.index_disk_bytes),
            })
        }
    })
}

#[cfg(test)]
#[path = "registry_tests.rs"]
pub(crate) mod tests;
