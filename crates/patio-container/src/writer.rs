//! The writer: one per process (in the FUSE mount, one per file and writing process), never
//! waiting on any other writer. Data is appended to the writer's own data log; index
//! entries are buffered and, at buffer-full, flush and close, compressed into one
//! record and appended to the writer's index log.
//!
//! Durability: every record and meta rewrite goes to the logs' page cache, so whatever
//! `publish`, `flush` or `close` acknowledged survives the process being killed. A
//! durable writer (the default) also syncs at `flush` and `close`: the data log before
//! the index record that refers to it, then the index log (and, the first time, the
//! container directory), so what they acknowledged survives a crash of the machine. A
//! writer with [`Writer::set_sync_on_flush`]`(false)` (the FUSE mount's, which syncs at
//! `fsync` and unmount through [`crate::tools::sync`]) does not sync at all; after a
//! machine crash its records may outlive data they refer to, which reads as zeros.
//!
//! A writer holds a `flock` on its index log while it lives — shared on a log it
//! created, exclusive on an ended writer's log it took over ([`Writer::reuse`]):
//! compaction (crate::compact) takes only logs it can lock exclusively, the logs of
//! ended writers.

use crate::error::{ContainerError, Result};
use crate::layout::{self, IndexMode, Truncation, WriterMeta};
use crate::record::{self, IndexEntry, MAX_RECORD_WRITES};
use patio_core::codec::put_frame;
use patio_core::Detector;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Index entries buffered before a record is written (a record per 64 Ki writes).
pub const DEFAULT_INDEX_BUFFER: usize = 1 << 16;

/// A record a writer appended to its index log, as a reader reads it back: for a
/// reader in the same process to take in without reading the log
/// ([`crate::Reader::with_appended`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The writer's name (its logs').
    pub writer: String,
    /// The frame's payload.
    pub payload: Vec<u8>,
    /// The index log's length after the frame.
    pub end: u64,
}

/// A writer of one container.
pub struct Writer {
    dir: PathBuf,
    name: String,
    mode: IndexMode,
    detector: Detector,
    data: File,
    index: File,
    data_len: u64,
    buffer: Vec<IndexEntry>,
    buffered_writes: u64,
    /// Records this writer appended (not counting those of the logs it took over).
    records: u64,
    buffer_limit: usize,
    meta: WriterMeta,
    /// The summary the meta file holds (`None`: not written by this writer yet).
    meta_written: Option<WriterMeta>,
    /// The meta file and its length, once this writer rewrote it.
    meta_file: Option<(File, u64)>,
    /// Records appended since the last [`Writer::take_appended`], kept only after
    /// [`Writer::set_keep_appended`].
    appended: Option<Vec<Appended>>,
    /// Set when a write to the logs failed half way: the writer refuses more work
    /// rather than index data it may not have.
    failed: Option<String>,
    closed: bool,
    /// `flush` and `close` sync the logs (see the module comment).
    sync_on_flush: bool,
    /// The container directory was synced since this writer's logs were created.
    dir_synced: bool,
}

impl Writer {
    /// Creates the container at `dir` if needed (with `mode`; an existing container
    /// keeps its own mode) and opens a new writer on it.
    pub fn create(dir: &Path, mode: IndexMode) -> Result<Self> {
        layout::create(dir, mode)?;
        Self::open(dir)
    }

    /// Opens a new writer on an existing container.
    pub fn open(dir: &Path) -> Result<Self> {
        let mode = layout::read_marker(dir)?;
        crate::compact::recover(dir)?;
        let (name, index) = claim_locked(dir)?;
        let data_path = layout::data_path(dir, &name);
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&data_path)
            .map_err(|e| ContainerError::io(&data_path, e))?;
        let data_len = data
            .metadata()
            .map_err(|e| ContainerError::io(&data_path, e))?
            .len();
        let writer = Writer::assemble(
            dir,
            name,
            mode,
            (data, index, data_len),
            WriterMeta::default(),
            None,
        );
        Ok(writer)
    }

    /// Takes over the logs of an ended writer of the container at `dir` — one whose
    /// index log nobody holds a lock on, whose data log is at most `max_data` bytes
    /// (the smallest such), with a readable meta file and an index log that ends on a
    /// whole record — and appends to them; `None` when there is none. A process that
    /// opens a file again and again (appending to a log, rewriting a small file) so
    /// leaves one log set instead of one per open. The meta file's end is cut to the
    /// truncations since the logs' last record, so `stat` stays exact.
    pub fn reuse(dir: &Path, max_data: u64) -> Result<Option<Self>> {
        let mode = layout::read_marker(dir)?;
        let names = match crate::compact::writers_and_leftovers(dir)? {
            (names, false) => names,
            _ => {
                crate::compact::recover(dir)?;
                layout::list_writers(dir)?
            }
        };
        let mut candidates: Vec<(u64, String)> = Vec::new();
        for name in names {
            let len = std::fs::metadata(layout::data_path(dir, &name)).map_or(0, |m| m.len());
            if len <= max_data {
                candidates.push((len, name));
            }
        }
        candidates.sort();
        for (_, name) in candidates {
            if let Some(w) = Self::take_over(dir, mode, &name)? {
                return Ok(Some(w));
            }
        }
        Ok(None)
    }

    /// [`Writer::reuse`] of the logs of writer `name`, `None` when they are in use,
    /// gone or not clean.
    fn take_over(dir: &Path, mode: IndexMode, name: &str) -> Result<Option<Self>> {
        use std::os::unix::fs::MetadataExt;
        let index_path = layout::index_path(dir, name);
        if layout::not_a_log(&index_path).is_some() {
            return Ok(None);
        }
        let mut index = match OpenOptions::new().read(true).append(true).open(&index_path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ContainerError::io(&index_path, e)),
        };
        if !layout::flock(&index, layout::LockKind::TryExclusive)
            .map_err(|e| ContainerError::io(&index_path, e))?
        {
            return Ok(None);
        }
        // A compaction may have removed the log between the listing and the lock.
        let ours = index
            .metadata()
            .map_err(|e| ContainerError::io(&index_path, e))?;
        match std::fs::metadata(&index_path) {
            Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {}
            _ => return Ok(None),
        }
        let Some(on_disk) = WriterMeta::read(&layout::meta_path(dir, name)) else {
            return Ok(None);
        };
        let mut meta = on_disk;
        if !ends_on_last_record(&mut index, &index_path, &mut meta)? {
            return Ok(None);
        }
        let data_path = layout::data_path(dir, name);
        let data = match OpenOptions::new().read(true).write(true).open(&data_path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ContainerError::io(&data_path, e)),
        };
        let data_len = data
            .metadata()
            .map_err(|e| ContainerError::io(&data_path, e))?
            .len();
        let (truncations, _) = layout::read_truncations(dir)?;
        if let Some(&t) = truncations.last() {
            // Every record is older than the truncations since the last one; the
            // newest cuts at most as much as any of them and holds the size.
            if meta.last_key < t.key {
                meta.apply_truncation(t);
            }
        }
        let mut writer = Writer::assemble(
            dir,
            name.to_string(),
            mode,
            (data, index, data_len),
            meta,
            Some(on_disk),
        );
        writer.write_meta()?;
        Ok(Some(writer))
    }

    /// Index records this writer appended.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes in the writer's data log (written by it and, for a writer that took over
    /// ended logs, before it).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Notes the truncation `t`, which someone appended after this writer's last
    /// record (its buffer empty: published first), so that its meta file's end stays
    /// exact while it writes on.
    pub fn note_truncation(&mut self, t: Truncation) -> Result<()> {
        self.usable()?;
        if !self.buffer.is_empty() || t.key <= self.meta.last_key {
            return Err(ContainerError::Invalid(format!(
                "{}: writer {}: a truncation must follow the writer's last record",
                self.dir.display(),
                self.name
            )));
        }
        self.meta.apply_truncation(t);
        self.write_meta()
    }

    /// Keeps every record this writer appends from now on for
    /// [`Writer::take_appended`] (a FUSE mount lays them over its cached reader).
    pub fn set_keep_appended(&mut self) {
        self.appended.get_or_insert_with(Vec::new);
    }

    /// The records appended since the last call (none unless
    /// [`Writer::set_keep_appended`]), in order.
    pub fn take_appended(&mut self) -> Vec<Appended> {
        self.appended
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// A writer of `dir` on the logs of `name`: its data log (`data_len` bytes long)
    /// and index log, its summary `meta`, and what its meta file holds (`on_disk`).
    fn assemble(
        dir: &Path,
        name: String,
        mode: IndexMode,
        (data, index, data_len): (File, File, u64),
        meta: WriterMeta,
        on_disk: Option<WriterMeta>,
    ) -> Self {
        Writer {
            dir: dir.to_path_buf(),
            name,
            mode,
            detector: Detector::default(),
            data,
            index,
            data_len,
            buffer: Vec::new(),
            buffered_writes: 0,
            records: 0,
            buffer_limit: DEFAULT_INDEX_BUFFER,
            meta,
            meta_written: on_disk,
            meta_file: None,
            appended: None,
            failed: None,
            closed: false,
            sync_on_flush: true,
            dir_synced: false,
        }
    }

    /// Index entries to buffer before writing a record (at least 1).
    pub fn set_index_buffer(&mut self, entries: usize) {
        self.buffer_limit = entries.clamp(1, MAX_RECORD_WRITES as usize);
    }

    /// Whether `flush` and `close` sync the logs (default `true`). Without it they only
    /// publish: acknowledged writes survive the process being killed, not the machine
    /// crashing, until someone syncs the container ([`crate::tools::sync`]).
    pub fn set_sync_on_flush(&mut self, sync: bool) {
        self.sync_on_flush = sync;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mode(&self) -> IndexMode {
        self.mode
    }

    /// One past the highest logical byte written so far, flushed or not.
    pub fn end(&self) -> u64 {
        self.meta.end
    }

    /// The key of the writer's last record (0 before its first): it changes whenever
    /// the writer writes a record, by itself too (when its buffer fills).
    pub fn last_key(&self) -> u64 {
        self.meta.last_key
    }

    /// Writes buffered since the last record (not yet visible to readers).
    pub fn unpublished_entries(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the next write may fill the buffer, so that the writer publishes a
    /// record by itself (a caller that orders writers by when they wrote publishes the
    /// others first).
    pub fn publishes_at_next_write(&self) -> bool {
        self.buffer.len() + 1 >= self.buffer_limit
    }

    /// Lays this writer's unpublished writes that meet `[offset, offset + buf.len())`
    /// over `buf` (which holds the file as readers see it), in write order, reading
    /// them back from the data log: what a reader would return once they are
    /// published. Returns how much of `buf` lies before the end of the furthest of
    /// these writes (0 when none reaches past `offset`), so the caller can extend a
    /// short read: the bytes between are a hole (zeros).
    pub fn overlay(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.usable()?;
        let end = offset.saturating_add(buf.len() as u64);
        let mut furthest = 0usize;
        for e in &self.buffer {
            let (lo, hi) = (e.logical.max(offset), (e.logical + e.length).min(end));
            if e.logical + e.length > offset {
                furthest = furthest.max((hi - offset) as usize);
            }
            if lo >= hi {
                continue;
            }
            let into = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
            self.data
                .read_exact_at(into, e.physical + (lo - e.logical))
                .map_err(|err| ContainerError::io(layout::data_path(&self.dir, &self.name), err))?;
        }
        Ok(furthest)
    }

    /// Writes `data` at logical `offset`.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.usable()?;
        let len = data.len() as u64;
        check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let path = || layout::data_path(&self.dir, &self.name);
        if let Err(e) = self.data.write_all_at(data, self.data_len) {
            self.failed = Some(format!("data write failed: {e}"));
            return Err(ContainerError::io(path(), e));
        }
        self.note(offset, len)
    }

    /// Records a write of `len` bytes at `offset` in the index without storing any
    /// data: scale models of the index (`patio bench container`) use it to leave
    /// exactly the index logs real writers would, without the data.
    pub fn record_without_data(&mut self, offset: u64, len: u64) -> Result<()> {
        self.usable()?;
        check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.note(offset, len)
    }

    fn note(&mut self, offset: u64, len: u64) -> Result<()> {
        let entry = IndexEntry {
            logical: offset,
            length: len,
            physical: self.data_len,
        };
        self.data_len += len;
        self.buffered_writes += 1;
        self.meta.writes += 1;
        self.meta.bytes += len;
        self.meta.end = self.meta.end.max(offset + len);
        match self.buffer.last_mut() {
            Some(last) if last.continued_by(&entry) => last.length += len,
            _ => self.buffer.push(entry),
        }
        if self.buffer.len() >= self.buffer_limit {
            self.write_record(false)?;
        }
        Ok(())
    }

    /// Makes every write so far visible to readers that open afterwards, and durable
    /// when the writer syncs on flush.
    pub fn flush(&mut self) -> Result<()> {
        self.usable()?;
        self.write_record(self.sync_on_flush)
    }

    /// Writes a record of what is buffered (if anything) without syncing anything:
    /// readers opened afterwards see it; a machine crash may lose it.
    pub fn publish(&mut self) -> Result<()> {
        self.usable()?;
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.write_record(false)
    }

    /// Truncates (or extends with a hole) the logical file to `size`, ordered after
    /// every write of this writer and every write any writer flushed before.
    pub fn truncate(&mut self, size: u64) -> Result<()> {
        self.flush()?;
        check_range(size, 0)?;
        let key = self.next_key();
        layout::append_truncation(&self.dir, Truncation { key, size }, self.sync_on_flush)?;
        self.meta.last_key = key;
        if self.meta.first_key == 0 {
            self.meta.first_key = key;
        }
        self.meta.apply_truncation(Truncation { key, size });
        self.write_meta()
    }

    /// Flushes and closes; returns the writer's summary.
    pub fn close(mut self) -> Result<WriterMeta> {
        self.flush()?;
        self.closed = true;
        Ok(self.meta)
    }

    fn usable(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(ContainerError::Invalid(format!(
                "{}: writer {} is unusable after an earlier error ({why})",
                self.dir.display(),
                self.name
            ))),
            None => Ok(()),
        }
    }

    /// A key later than every earlier key of this writer.
    fn next_key(&self) -> u64 {
        layout::now_ns().max(self.meta.last_key + 1)
    }

    /// Appends a record of the buffer (if any) and rewrites the meta file; with `sync`,
    /// the data log is synced before the record and the index log after it.
    fn write_record(&mut self, sync: bool) -> Result<()> {
        let data_path = layout::data_path(&self.dir, &self.name);
        let index_path = layout::index_path(&self.dir, &self.name);
        if !self.buffer.is_empty() {
            let synced = if sync { self.data.sync_data() } else { Ok(()) };
            if let Err(e) = synced {
                self.failed = Some(format!("data sync failed: {e}"));
                return Err(ContainerError::io(data_path, e));
            }
            let key = self.next_key();
            let payload = record::encode(
                self.mode,
                key,
                self.buffered_writes,
                &self.buffer,
                &self.detector,
            );
            let mut frame = Vec::with_capacity(payload.len() + 8);
            put_frame(&mut frame, &payload);
            if let Err(e) = self.index.write_all(&frame) {
                self.failed = Some(format!("index append failed: {e}"));
                return Err(ContainerError::io(index_path, e));
            }
            // A writer's first record (or one whose meta did not know the length):
            // where the log ends now.
            self.meta.index_len = match self.meta.index_len {
                0 => self
                    .index
                    .metadata()
                    .map_err(|e| ContainerError::io(&index_path, e))?
                    .len(),
                n => n + frame.len() as u64,
            };
            if let Some(kept) = self.appended.as_mut() {
                kept.push(Appended {
                    writer: self.name.clone(),
                    payload,
                    end: self.meta.index_len,
                });
            }
            self.buffer.clear();
            self.buffered_writes = 0;
            self.records += 1;
            if self.meta.first_key == 0 {
                self.meta.first_key = key;
            }
            self.meta.last_key = key;
        }
        if sync {
            self.index
                .sync_data()
                .map_err(|e| ContainerError::io(&index_path, e))?;
            if !self.dir_synced {
                layout::sync_dir(&self.dir)?;
                self.dir_synced = true;
            }
        }
        self.write_meta()
    }

    /// Rewrites the meta file when the summary changed since it was last written
    /// (kept open from the first rewrite on).
    fn write_meta(&mut self) -> Result<()> {
        if self.meta_written == Some(self.meta) {
            return Ok(());
        }
        let path = layout::meta_path(&self.dir, &self.name);
        let (file, len) = match self.meta_file.take() {
            Some(open) => open,
            None => WriterMeta::open_for_writing(&path)?,
        };
        let len = self.meta.write_to(&file, len, &path)?;
        self.meta_file = Some((file, len));
        self.meta_written = Some(self.meta);
        Ok(())
    }
}

impl Drop for Writer {
    /// A writer dropped without `close` still flushes what it can (errors cannot be
    /// reported from here; call `close` to see them).
    fn drop(&mut self) {
        if !self.closed && self.failed.is_none() {
            let _ = self.write_record(self.sync_on_flush);
        }
    }
}

/// Claims a writer name and takes the shared lock on its index log. A compaction
/// that saw the fresh log before the lock was taken may have removed it as an ended
/// writer's: then the name is given up and another claimed.
fn claim_locked(dir: &Path) -> Result<(String, File)> {
    use std::os::unix::fs::MetadataExt;
    loop {
        let (name, index) = layout::claim_writer(dir)?;
        let path = layout::index_path(dir, &name);
        layout::flock(&index, layout::LockKind::Shared)
            .map_err(|e| ContainerError::io(&path, e))?;
        let ours = index.metadata().map_err(|e| ContainerError::io(&path, e))?;
        match std::fs::metadata(&path) {
            Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => return Ok((name, index)),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ContainerError::io(&path, e)),
        }
    }
}

/// Whether the index log `index` ends on a whole record keyed `meta.last_key`: what a
/// writer taking it over appends after. With the length the meta file records,
/// one `fstat`; without (a version-2 meta file), the log is read and its frames
/// checked, and the length noted in `meta`. A torn or damaged tail (what is appended
/// after it would not be read) or a meta file that lags the index (a writer killed
/// between the two) fails.
fn ends_on_last_record(index: &mut File, path: &Path, meta: &mut WriterMeta) -> Result<bool> {
    let len = index
        .metadata()
        .map_err(|e| ContainerError::io(path, e))?
        .len();
    if meta.index_len != 0 {
        let has_records = len > layout::LOG_HEADER as u64;
        return Ok(len == meta.index_len && (meta.last_key != 0) == has_records);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(index, &mut bytes).map_err(|e| ContainerError::io(path, e))?;
    if layout::check_log_header(path, &bytes, layout::INDEX_MAGIC, layout::INDEX_VERSION).is_err() {
        return Ok(false);
    }
    let (frames, damage) =
        patio_core::codec::read_frames(&bytes[layout::LOG_HEADER..], layout::LOG_HEADER);
    let last_key = frames.last().map_or(Some(0), |(_, p)| record::key_of(p));
    meta.index_len = bytes.len() as u64;
    Ok(damage.is_none() && last_key == Some(meta.last_key))
}

/// Refuses ranges that end beyond 2^63 - 1.
fn check_range(offset: u64, len: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(ContainerError::Invalid(format!(
            "write of {len} bytes at offset {offset} ends beyond 2^63-1"
        ))),
    }
}

/// Bytes of the index log one writer leaves after writing `pieces` (`(logical offset,
/// length)`, in write order, one write each) to a new `mode` container and closing:
/// entries merged as the writer merges them, one record per [`DEFAULT_INDEX_BUFFER`]
/// entries, frames and the log header included. Plans use it to report the size of a
/// remap before writing it.
pub fn index_log_bytes(mode: IndexMode, pieces: &[(u64, u64)], detector: &Detector) -> u64 {
    let mut entries: Vec<IndexEntry> = Vec::new();
    let mut writes_per_entry: Vec<u64> = Vec::new();
    let mut physical = 0u64;
    for &(logical, length) in pieces.iter().filter(|p| p.1 > 0) {
        let entry = IndexEntry {
            logical,
            length,
            physical,
        };
        physical += length;
        match entries.last_mut() {
            Some(last) if last.continued_by(&entry) => {
                last.length += length;
                *writes_per_entry.last_mut().expect("paired") += 1;
            }
            _ => {
                entries.push(entry);
                writes_per_entry.push(1);
            }
        }
    }
    let mut total = layout::LOG_HEADER as u64;
    for (key, (chunk, writes)) in entries
        .chunks(DEFAULT_INDEX_BUFFER)
        .zip(writes_per_entry.chunks(DEFAULT_INDEX_BUFFER))
        .enumerate()
    {
        let payload = record::encode(mode, key as u64 + 1, writes.iter().sum(), chunk, detector);
        total += 8 + payload.len() as u64;
    }
    total
}
