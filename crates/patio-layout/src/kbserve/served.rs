//! Served logs: the reads a replica set served, counted in the knowledge base's record
//! logs (record log version 2, frame kind 3; docs/FORMATS.md "Record log") instead of
//! a write transaction in the reading process. The next merge
//! (`patio.layout.kb.KnowledgeBase.merge`) adds them to the replicas' rows.

use crate::kblog::{random_hex, MAGIC};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The reads one replica served, as a served log counts them.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    pub id: i64,
    pub uses: u64,
    pub benefit: f64,
    /// When they were counted (seconds since the epoch): the replica's `last_used`.
    pub last_used: f64,
    /// The replica's file as its row names it: a merge counts the reads only for the row
    /// of this id with this path (ids of removed replicas may be used again).
    pub path: String,
}

/// The record log version a served log carries (docs/FORMATS.md "Record log": version
/// 2 adds frame kind 3; logs of reads alone stay version 1).
pub const SERVED_LOG_VERSION: u16 = 2;
const KIND_SERVED: u8 = 3;

/// A served log: the record log header (version 2), one served frame, the end frame.
pub fn served_log(counts: &[Served]) -> Vec<u8> {
    let mut p = vec![KIND_SERVED, 0, 0, 0];
    p.extend_from_slice(&(counts.len() as u32).to_le_bytes());
    for c in counts {
        p.extend_from_slice(&c.id.to_le_bytes());
        p.extend_from_slice(&(c.uses as i64).to_le_bytes());
        p.extend_from_slice(&c.benefit.to_le_bytes());
        p.extend_from_slice(&c.last_used.to_le_bytes());
        let path = &c.path.as_bytes()[..c.path.len().min(u16::MAX as usize)];
        p.extend_from_slice(&(path.len() as u16).to_le_bytes());
        p.extend_from_slice(path);
    }
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&SERVED_LOG_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    out.extend_from_slice(&p);
    out.extend_from_slice(&crate::kblog::encode_end());
    out
}

/// Writes a served log into `dir` (the knowledge base's `records`) as a new log of this
/// process, `<host>.<pid>-<8 hex>.log`, with one `write`: a merge reads it whole, or -
/// killed mid-write - up to its torn frame, which it drops; no `fsync` (counts may be
/// lost in a crash, nothing else).
pub fn write_served_log(dir: &Path, counts: &[Served]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = format!(
        "{}.{}-{}.log",
        patio_container::layout::host_name(),
        std::process::id(),
        random_hex()
    );
    let path = dir.join(name);
    let mut f = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o666)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)?;
    f.write_all(&served_log(counts))?;
    Ok(path)
}
