//! The reader: loads every index log (in parallel threads), merges them into one
//! [`GlobalIndex`] and serves `read_at` through it. Holes read as zeros; reads past
//! the end are short. Damaged index records are skipped with the rest of their log,
//! and reported.
//!
//! For MPI, the load can be split: each rank reads a share of the index logs
//! ([`read_logs`]), the ranks exchange the intact bytes ([`pack_logs`] /
//! [`unpack_logs`]) and every rank builds the same reader from all of them
//! ([`Reader::from_logs`]) without touching the other ranks' files.
//!
//! A reader is brought up to date without merging everything again (`refresh`):
//! from the backend ([`Reader::refresh`]) or from its own process's writers
//! ([`Reader::with_appended`]). `logs` reads the index logs; `plan` turns logical
//! extents into the physical reads that serve them.

mod logs;
mod plan;
mod refresh;

use self::logs::{decode_log, extend_log, load_log, parallel_map};
pub use self::logs::{pack_logs, read_logs, unpack_logs, LogBytes};
pub use self::plan::{ExtentPlan, RunPlace, SIEVE_GAP, SIEVE_SPAN};
use crate::delta::Delta;
use crate::error::{ContainerError, Result};
use crate::global::{GlobalIndex, IndexStats};
use crate::layout::{self, Damage, IndexMode};
use crate::record::{IndexEntry, Record};
use crate::segments::split_writer;
use patio_core::{Detector, Lookup};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// A writer's decoded records (shared, so that a refreshed reader's copy of a log
/// that grew costs no decoding and no copy of what was read before).
#[derive(Clone, Debug)]
struct WriterLog {
    name: String,
    records: Vec<Arc<Record>>,
    disk_bytes: u64,
    /// `(device, inode)` of the index log read, and whether all of it decoded: a
    /// [`Reader::refresh`] then reads only what was appended since.
    file: Option<(u64, u64)>,
    clean: bool,
}

/// What `patio container stat` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerStats {
    pub mode: IndexMode,
    pub size: u64,
    pub writers: u64,
    pub records: u64,
    pub writes: u64,
    /// Entries a one-entry-per-write index (contiguous runs merged) would hold.
    pub raw_entries: u64,
    pub index_disk_bytes: u64,
    pub index: IndexStats,
    pub damaged_logs: u64,
}

impl ContainerStats {
    /// The counts of the logs `writers` of a `mode` container of `size` bytes (no
    /// merged index, no damage).
    fn of_logs(mode: IndexMode, size: u64, writers: &[WriterLog]) -> Self {
        let count = |f: fn(&Record) -> u64| -> u64 {
            writers.iter().flat_map(|w| &w.records).map(|r| f(r)).sum()
        };
        ContainerStats {
            mode,
            size,
            writers: writers.len() as u64,
            records: writers.iter().map(|w| w.records.len() as u64).sum(),
            writes: count(|r| r.writes),
            raw_entries: count(|r| r.columns.len()),
            index_disk_bytes: writers.iter().map(|w| w.disk_bytes).sum(),
            index: IndexStats::default(),
            damaged_logs: 0,
        }
    }

    /// Raw index bytes (24 per entry) over the index bytes on disk.
    pub fn compression_ratio(&self) -> f64 {
        if self.index_disk_bytes == 0 {
            return 1.0;
        }
        (self.raw_entries * 24) as f64 / self.index_disk_bytes as f64
    }
}

/// A container opened for reading.
pub struct Reader {
    dir: PathBuf,
    mode: IndexMode,
    /// Writers in chunk order.
    writers: Vec<WriterLog>,
    /// The writers' data logs, opened once (shared with the readers refreshed from
    /// this one while the writers stay the same).
    data: Arc<[OnceLock<File>]>,
    /// The merged index of every record when the reader was built…
    index: Arc<GlobalIndex>,
    /// …and what a refresh applied over it since (crate::delta).
    delta: Delta,
    /// The truncations applied (the merged index's, then the delta's).
    truncations: Vec<layout::Truncation>,
    /// The newest record or truncation key applied.
    newest_key: u64,
    /// Whether every writer's records were merged for this reader (else a refresh
    /// applied the newer ones over a previous reader's merged index).
    merged_anew: bool,
    stats: ContainerStats,
    damage: Vec<Damage>,
}

impl Reader {
    /// Opens the container at `dir`, reading and decoding every index log in
    /// parallel threads. The truncation log is read before the index logs are
    /// listed, and every data log is opened at once: a compaction publishing
    /// meanwhile removes logs only after their replacement is in place, so a log
    /// that vanishes between the listing and its opening means "list again".
    pub fn open(dir: &Path) -> Result<Self> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::open_once(dir, None)? {
                Some(r) => return Ok(r),
                None if attempt < 1000 => continue,
                None => {
                    return Err(ContainerError::Invalid(format!(
                        "{}: index logs keep vanishing while being read",
                        dir.display()
                    )))
                }
            }
        }
    }

    /// A reader of the container as it is now, reading only what changed since this
    /// reader was built: index logs that grew are read from where this reader stopped
    /// (logs only grow, and a log is the same file when its device and inode are),
    /// new logs entirely, and logs that went (compacted) are dropped. The merge of
    /// every writer's records into the global index is redone.
    pub fn refresh(&self) -> Result<Self> {
        for _ in 0..1000 {
            if let Some(r) = Self::open_once(&self.dir, Some(self))? {
                return Ok(r);
            }
        }
        Err(ContainerError::Invalid(format!(
            "{}: index logs keep vanishing while being read",
            self.dir.display()
        )))
    }

    /// One attempt of [`Reader::open`] (or, from `prev`, of [`Reader::refresh`]);
    /// `None` when a log vanished under it.
    fn open_once(dir: &Path, prev: Option<&Reader>) -> Result<Option<Self>> {
        // A refresh finds a container that went by its logs (and a full build reads
        // the marker again).
        if prev.is_none() {
            layout::read_marker(dir)?;
        }
        // The truncation log is read whole every time: a compaction replaces it by a
        // rewritten one, and a file's identity cannot tell the two apart (a file
        // system hands a freed inode number out again, and a pruned log soon has its
        // old length again: a reader that took it for unchanged served what a newer
        // truncation had cut). It is a few records long (compaction prunes it).
        let truncations = layout::read_truncations(dir)?;
        let names = layout::list_writers(dir)?;
        let known: std::collections::HashMap<&str, &WriterLog> = prev
            .into_iter()
            .flat_map(|r| &r.writers)
            .filter(|w| w.clean && w.file.is_some())
            .map(|w| (w.name.as_str(), w))
            .collect();
        let loaded = parallel_map(&names, |name| match known.get(name.as_str()) {
            Some(old) => match extend_log(dir, old)? {
                Some(grown) => Ok(Some(grown)),
                None => load_log(dir, name),
            },
            None => load_log(dir, name),
        })?;
        let mut damage = Vec::new();
        let mut writers = Vec::with_capacity(loaded.len());
        for item in loaded {
            let Some((w, d)) = item else {
                return Ok(None);
            };
            damage.extend(d);
            writers.push(w);
        }
        if let Some(prev) = prev {
            if let Some(r) = Self::extend(prev, &mut writers, &damage, &truncations) {
                return Ok(Some(r));
            }
        }
        let reader = Self::build(dir, writers, damage, truncations)?;
        for (chunk, w) in reader.writers.iter().enumerate() {
            let path = layout::data_path(dir, &w.name);
            match File::open(&path) {
                Ok(f) => {
                    let _ = reader.data[chunk].set(f);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if !layout::index_path(dir, &w.name).exists() {
                        return Ok(None);
                    }
                }
                // Reported by the read that needs it.
                Err(_) => {}
            }
        }
        Ok(Some(reader))
    }

    /// Builds the reader from index logs read elsewhere (by other MPI ranks).
    pub fn from_logs(dir: &Path, logs: Vec<LogBytes>) -> Result<Self> {
        layout::read_marker(dir)?;
        let truncations = layout::read_truncations(dir)?;
        Self::from_logs_with(dir, logs, truncations)
    }

    /// A reader of some writers' logs only (`logs`, read by [`read_logs`]) under the
    /// given truncations: what a compaction rewrites.
    pub(crate) fn from_logs_with(
        dir: &Path,
        logs: Vec<LogBytes>,
        truncations: (Vec<layout::Truncation>, Vec<Damage>),
    ) -> Result<Self> {
        let mut damage = Vec::new();
        let mut writers = Vec::with_capacity(logs.len());
        for log in logs {
            damage.extend(log.damage.iter().cloned());
            let path = layout::index_path(dir, &log.writer);
            let (records, more) = decode_log(&path, &log.bytes);
            damage.extend(more);
            writers.push(WriterLog {
                name: log.writer,
                records: records.into_iter().map(Arc::new).collect(),
                disk_bytes: log.disk_bytes,
                file: None,
                clean: false,
            });
        }
        Self::build(dir, writers, damage, truncations)
    }

    fn build(
        dir: &Path,
        mut writers: Vec<WriterLog>,
        mut damage: Vec<Damage>,
        truncations: (Vec<layout::Truncation>, Vec<Damage>),
    ) -> Result<Self> {
        let mode = layout::read_marker(dir)?;
        let (truncations, more) = truncations;
        damage.extend(more);
        // Chunk numbers follow the writers' first offsets, so interleaved writers get
        // consecutive numbers and a tile's chunk column is one pattern.
        writers.sort_by(|a, b| (first_offset(a), &a.name).cmp(&(first_offset(b), &b.name)));
        if writers.len() > u32::MAX as usize {
            return Err(ContainerError::Invalid("more than 2^32 writers".into()));
        }
        let patterns = mode == IndexMode::Pattern;
        let mut segments = Vec::new();
        let mut loose = Vec::new();
        for (chunk, w) in writers.iter().enumerate() {
            let (s, l) = split_writer(chunk as u32, &w.records, patterns);
            segments.extend(s);
            loose.extend(l);
        }
        let (index, index_stats) = GlobalIndex::build(
            segments,
            loose,
            &truncations,
            patterns,
            &Detector::default(),
        )?;
        let stats = ContainerStats {
            index: index_stats,
            damaged_logs: damage.len() as u64,
            ..ContainerStats::of_logs(mode, index.size(), &writers)
        };
        let data = (0..writers.len()).map(|_| OnceLock::new()).collect();
        let newest_key = writers
            .iter()
            .filter_map(|w| w.records.last())
            .map(|r| r.key)
            .chain(truncations.last().map(|t| t.key))
            .max()
            .unwrap_or(0);
        Ok(Reader {
            dir: dir.to_path_buf(),
            mode,
            writers,
            data,
            delta: Delta::new(index.size()),
            index: Arc::new(index),
            truncations,
            newest_key,
            merged_anew: true,
            stats,
            damage,
        })
    }

    pub fn size(&self) -> u64 {
        self.delta.size()
    }

    /// Whether every writer's records were merged for this reader ([`Reader::open`],
    /// or a refresh that could not apply the changes over the previous reader).
    pub fn merged_anew(&self) -> bool {
        self.merged_anew
    }

    /// What is at logical offset `x` (holes and unmapped ranges as in patio-core;
    /// the caller applies the file size): the merged index with what a refresh
    /// applied over it.
    pub fn lookup(&self, x: u64) -> Lookup {
        self.delta.lookup(x, |y| self.index.lookup(y))
    }

    /// The container's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn mode(&self) -> IndexMode {
        self.mode
    }

    pub fn stats(&self) -> &ContainerStats {
        &self.stats
    }

    /// Damaged records found while opening (their logs were used up to them).
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// The merged index as built: a reader from [`Reader::refresh`] may hold newer
    /// changes over it; [`Reader::lookup`] sees both.
    pub fn index(&self) -> &GlobalIndex {
        &self.index
    }

    /// Writer names in chunk order (chunk `i` is `writers()[i]`).
    pub fn writers(&self) -> Vec<&str> {
        self.writers.iter().map(|w| w.name.as_str()).collect()
    }

    /// Every indexed write, writer by writer in write order:
    /// `(chunk, record key, entry)`.
    pub fn writes(&self) -> impl Iterator<Item = (u32, u64, IndexEntry)> + '_ {
        self.writers.iter().enumerate().flat_map(|(chunk, w)| {
            w.records.iter().flat_map(move |r| {
                (0..r.columns.len()).map(move |i| (chunk as u32, r.key, r.columns.get(i)))
            })
        })
    }

    /// Reads into `buf` from logical `offset`; returns the bytes read (short at the
    /// end of the file, 0 at or past it).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let size = self.size();
        if offset >= size {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(size - offset) as usize;
        self.read_extents(&[(offset, want as u64)], &mut buf[..want])?;
        Ok(want)
    }

    /// Reads `out.len()` bytes of chunk `chunk`'s data log from `physical`.
    pub(crate) fn read_data(&self, chunk: usize, physical: u64, out: &mut [u8]) -> Result<()> {
        let path = layout::data_path(&self.dir, &self.writers[chunk].name);
        let file = match self.data[chunk].get() {
            Some(f) => f,
            None => {
                let f = File::open(&path).map_err(|e| ContainerError::io(&path, e))?;
                let _ = self.data[chunk].set(f);
                self.data[chunk].get().expect("just set")
            }
        };
        let mut done = 0;
        while done < out.len() {
            match file.read_at(&mut out[done..], physical + done as u64) {
                Ok(0) => {
                    return Err(ContainerError::Corrupt {
                        path: path.display().to_string(),
                        offset: physical + done as u64,
                        reason: "data log ends before the bytes its index refers to".into(),
                    })
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ContainerError::io(&path, e)),
            }
        }
        Ok(())
    }
}

/// Writer with no records sort last.
fn first_offset(w: &WriterLog) -> u64 {
    w.records
        .iter()
        .find(|r| !r.columns.is_empty())
        .map_or(u64::MAX, |r| r.columns.get(0).logical)
}
