//! Compaction: the container's lifecycle. Writers only ever append, truncations only
//! add records, so a file rewritten again and again leaves log sets that hold only
//! dead bytes. Compaction rewrites the live data of every *ended* writer (one whose
//! index log nobody holds the shared lock on, see crate::writer) into one new log
//! set and removes the logs it replaces; logs that hold nothing live (everything a
//! truncation to zero cut) are removed with no replacement.
//!
//! Writers active during a compaction are never touched: their logs are not sources,
//! and the compacted records keep the keys of the writes they hold, so the order of
//! every overlap with an active writer (newest key wins) stays what it was. Inside
//! the compacted set each live byte belongs to exactly one record. Keys older than
//! every record of the writers left alone are merged into one (the newest of them):
//! live bytes do not overlap, and nothing else orders against them, so with no
//! active writer the whole set is one record key (a few records at most).
//!
//! Crash safety — the steps, each durable before the next:
//! 1. the new data and index logs are written under temporary names (`.compact.*`)
//!    and fsynced, and a manifest `compacted.<w>` names the source writers;
//! 2. the data log and meta file are renamed to their final names (no reader looks
//!    at a data log without an index log);
//! 3. **publish**: the index log is renamed to `index.<w>`: from here on readers see
//!    the new set, at first beside the sources (the same bytes under the same keys,
//!    so every read answers the same);
//! 4. the sources are removed, index log first (one step per file);
//! 5. the truncation log is rewritten without the truncations nothing needs any more;
//! 6. the manifest is removed.
//!
//! When nothing of the sources is live, steps 2 and 3 do not exist and the manifest
//! says so. A crash before 3 leaves temporary files and an unpublished set, which
//! [`recover`] removes; after 3 (or with nothing live, after 1), [`recover`]
//! finishes the removal of the sources the manifest names. Readers open every data log when they open (crate::reader),
//! so a reader built before a compaction keeps reading the removed logs.

use crate::error::{ContainerError, Result};
use crate::layout::{self, FileLock, IndexMode, LockKind, Truncation, WriterMeta};
use crate::reader::{read_logs, Reader};
use crate::record::{self, IndexEntry};
use crate::writer::DEFAULT_INDEX_BUFFER;
use patio_core::codec::{put_frame, put_uvarint, read_blob, write_blob, Cursor};
use patio_core::{Detector, Lookup};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

const MANIFEST_PREFIX: &str = "compacted.";
const MANIFEST_MAGIC: &[u8; 4] = b"PCMP";
const MANIFEST_VERSION: u16 = 1;
const TEMP_PREFIX: &str = ".compact.";

/// When the mount compacts a file on its own (after a truncation or a close), see
/// [`plan`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Merge the small logs when the container holds more than this many index logs.
    pub max_logs: u64,
    /// Compact everything when the logs occupy more than `dead_ratio` × the logical
    /// size plus `min_dead` bytes.
    pub dead_ratio: f64,
    pub min_dead: u64,
    /// Logs whose data log is larger are not rewritten just to lower the log count
    /// (an N-1 checkpoint's per-process logs stay as they are; dead bytes still count).
    pub small_log: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_logs: 8,
            dead_ratio: 2.0,
            min_dead: 4 << 20,
            small_log: 1 << 20,
        }
    }
}

/// What a compaction should take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Nothing,
    /// Every ended writer's logs.
    All,
    /// The ended writers whose data log is at most this many bytes.
    SmallLogs(u64),
}

/// What [`compact`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Ended writers whose logs were replaced (0: nothing to do).
    pub sources: u64,
    /// Writers left alone because they are still writing.
    pub active: u64,
    /// The new log set (`None` when nothing of the sources was live).
    pub writer: Option<String>,
    /// Live bytes copied, and records written.
    pub live_bytes: u64,
    pub records: u64,
    /// Bytes of the sources' data and index logs, and files removed.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub files_removed: u64,
    /// Truncation records dropped from the truncation log.
    pub truncations_dropped: u64,
    /// Leftovers of an interrupted compaction cleaned first.
    pub recovered: u64,
    /// Another compaction held the container (only when not waiting).
    pub busy: bool,
}

/// Dead bytes beyond `dead_ratio` × the size a file at rest keeps (instead of
/// `min_dead`): a few blocks of each log file.
pub const AT_REST_DEAD: u64 = 64 << 10;

/// What to compact in `dir` under `t` (from the writers' files alone): everything
/// when the logs hold more than `dead_ratio` × the size + `min_dead` bytes (at rest,
/// [`AT_REST_DEAD`] at most) (or an interrupted compaction left files); the small logs when there are more than
/// `max_logs` logs — or, `at_rest` (nobody has the file open, or it was truncated to
/// zero), more than one — and at least two of them are small, or, at rest, when a
/// small log's index is heavy (more than 16 KiB and a quarter of its data).
pub fn plan(dir: &Path, t: &Thresholds, at_rest: bool) -> Result<Plan> {
    if has_leftovers(dir)? {
        return Ok(Plan::All);
    }
    let logs = layout::list_writers(dir)?.len() as u64;
    if logs == 0 {
        return Ok(Plan::Nothing);
    }
    let q = crate::tools::stat(dir)?;
    // An empty file's logs are all dead: removing them copies nothing. A file at rest
    // (nobody writing, so nothing copied now is overwritten next) tolerates only
    // `AT_REST_DEAD` dead bytes beyond the ratio.
    let tolerated = if at_rest {
        t.min_dead.min(AT_REST_DEAD)
    } else {
        t.min_dead
    };
    if q.size == 0 || q.disk_bytes as f64 > q.size as f64 * t.dead_ratio + tolerated as f64 {
        return Ok(Plan::All);
    }
    let limit = if at_rest { 1 } else { t.max_logs };
    let mut small = 0;
    let mut heavy = false;
    for name in layout::list_writers(dir)? {
        let data = file_len(&layout::data_path(dir, &name));
        if data <= t.small_log {
            small += 1;
            heavy |= index_heavy(file_len(&layout::index_path(dir, &name)), data);
        }
    }
    Ok(if (logs > limit && small >= 2) || (at_rest && heavy) {
        Plan::SmallLogs(t.small_log)
    } else {
        Plan::Nothing
    })
}

/// Compacts the container at `dir` (see the module documentation); waits for a
/// compaction already running when `wait`, else returns at once with `busy`.
pub fn compact(dir: &Path, wait: bool) -> Result<Compacted> {
    compact_scoped(dir, wait, None, Steps::new(u64::MAX))
}

/// [`compact`] of what `plan` says (nothing for [`Plan::Nothing`]).
pub fn compact_planned(dir: &Path, wait: bool, plan: Plan) -> Result<Compacted> {
    match plan {
        Plan::Nothing => Ok(Compacted::default()),
        Plan::All => compact_scoped(dir, wait, None, Steps::new(u64::MAX)),
        Plan::SmallLogs(limit) => compact_scoped(dir, wait, Some(limit), Steps::new(u64::MAX)),
    }
}

/// [`compact`], stopping (as a crash would) after `steps` durable steps: how the
/// tests interrupt it at every point.
#[doc(hidden)]
pub fn compact_steps(dir: &Path, wait: bool, steps: u64) -> Result<Compacted> {
    compact_scoped(dir, wait, None, Steps::new(steps))
}

/// Where a compaction stands when [`compact_interleaved`] calls its hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The sources are chosen and locked; nothing of them is read yet.
    Locked,
    /// The sources' logs and the truncation log are read, the live bytes known.
    Read,
    /// `done` of the `total` live bytes are copied into the new data log (reported
    /// before the first byte, then at least every [`COPY_REPORT`] bytes and at the end).
    Copying { done: u64, total: u64 },
    /// One of the durable steps of the module documentation is done (1 to 6; the
    /// removal of the sources, step 4, is one step per file).
    Step(u64),
}

/// Live bytes copied between two [`Stage::Copying`] reports.
pub const COPY_REPORT: u64 = 1 << 20;

/// [`compact`] (of what `plan` says, waiting for a compaction already running)
/// calling `hook` at every [`Stage`]: how `patio container compact` shows progress,
/// and where the tests interleave writes, truncations and reads deterministically.
pub fn compact_interleaved(
    dir: &Path,
    plan: Plan,
    hook: &mut dyn FnMut(Stage),
) -> Result<Compacted> {
    let steps = Steps {
        left: u64::MAX,
        done: 0,
        hook: Some(hook),
    };
    match plan {
        Plan::Nothing => Ok(Compacted::default()),
        Plan::All => compact_scoped(dir, true, None, steps),
        Plan::SmallLogs(limit) => compact_scoped(dir, true, Some(limit), steps),
    }
}

/// A compaction of the ended writers' logs — those whose data log is at most
/// `max_source` bytes, if given — stopping after `steps` steps.
fn compact_scoped(
    dir: &Path,
    wait: bool,
    max_source: Option<u64>,
    mut steps: Steps,
) -> Result<Compacted> {
    layout::read_marker(dir)?;
    let kind = if wait {
        LockKind::Exclusive
    } else {
        LockKind::TryExclusive
    };
    let Some(_lock) = FileLock::try_acquire(dir, layout::COMPACT_LOCK, kind)? else {
        return Ok(Compacted {
            busy: true,
            ..Compacted::default()
        });
    };
    let mut out = Compacted {
        recovered: recover_locked(dir)?,
        ..Compacted::default()
    };
    run(dir, &mut out, &mut steps, max_source)?;
    Ok(out)
}

/// Counts down the steps a compaction may still take, and calls the tests' hook.
struct Steps<'a> {
    left: u64,
    done: u64,
    hook: Option<&'a mut dyn FnMut(Stage)>,
}

impl Steps<'_> {
    fn new(left: u64) -> Self {
        Steps {
            left,
            done: 0,
            hook: None,
        }
    }

    /// A durable step is done. False once the budget is spent: the caller stops
    /// where it is.
    fn step(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.done += 1;
        let done = self.done;
        self.reached(Stage::Step(done));
        true
    }

    fn reached(&mut self, stage: Stage) {
        if let Some(hook) = self.hook.as_mut() {
            hook(stage);
        }
    }
}

/// The ended writers: their index logs locked exclusively (kept until the end).
fn ended_writers(dir: &Path, names: &[String]) -> Result<(Vec<String>, Vec<File>, u64)> {
    let (mut ended, mut locks, mut active) = (Vec::new(), Vec::new(), 0);
    for name in names {
        let path = layout::index_path(dir, name);
        if layout::not_a_log(&path).is_some() {
            continue;
        }
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ContainerError::io(&path, e)),
        };
        if layout::flock(&f, LockKind::TryExclusive).map_err(|e| ContainerError::io(&path, e))? {
            ended.push(name.clone());
            locks.push(f);
        } else {
            active += 1;
        }
    }
    Ok((ended, locks, active))
}

fn run(dir: &Path, out: &mut Compacted, budget: &mut Steps, max_source: Option<u64>) -> Result<()> {
    let mode = layout::read_marker(dir)?;
    let names = layout::list_writers(dir)?;
    let (mut sources, _locks, active) = ended_writers(dir, &names)?;
    out.active = active;
    if let Some(limit) = max_source {
        // Large logs stay (locked until the end, like every ended writer's).
        sources.retain(|n| file_len(&layout::data_path(dir, n)) <= limit);
    }
    budget.reached(Stage::Locked);
    // The truncations are read once the sources are locked (ended writers append
    // nothing more): every truncation this compaction does not see is keyed after
    // every record it rewrites, so it still cuts the compacted records, whatever
    // keys they are merged under. (Read before the locks, a truncation appended in
    // between and a record written after it by a writer that then ended would be a
    // source's record the compaction orders, unseen truncation and all, after it.)
    let truncations = layout::read_truncations(dir)?;
    if !truncations.1.is_empty() {
        return Err(damaged(dir, &truncations.1[0]));
    }
    let prunable = truncations.0.len() > 1;
    let empty = |n: &String| file_len(&layout::index_path(dir, n)) <= layout::LOG_HEADER as u64;
    let worth = sources.len() >= 2
        || prunable
        || sources.iter().any(empty)
        || single_has_dead(dir, &sources, &truncations.0);
    // A lone log set that others write on after (a reused writer's logs) may still
    // hold bytes overwritten since: it is worth rewriting when its live bytes are
    // fewer than its data log's, which only its index can tell.
    if !worth && sources.is_empty() {
        return Ok(());
    }
    // Logs without a record hold nothing (and may be a writer's that is claiming its
    // name: it gives the name up when it finds the log gone).
    let with_records: Vec<String> = sources.iter().filter(|n| !empty(n)).cloned().collect();
    let logs = read_logs(dir, &with_records)?;
    if let Some(d) = logs.iter().flat_map(|l| &l.damage).next() {
        return Err(damaged(dir, d));
    }
    let reader = Reader::from_logs_with(dir, logs, truncations.clone())?;
    let live = merge_keys(live_extents(&reader), oldest_kept_key(dir, &sources)?);
    budget.reached(Stage::Read);
    if !worth {
        let live_bytes: u64 = live.values().flatten().map(|r| r.1).sum();
        let sum = |path: fn(&Path, &str) -> std::path::PathBuf| -> u64 {
            sources.iter().map(|n| file_len(&path(dir, n))).sum()
        };
        let (data_bytes, index_bytes) = (sum(layout::data_path), sum(layout::index_path));
        if live_bytes >= data_bytes && !index_heavy(index_bytes, data_bytes) {
            return Ok(());
        }
    }
    out.sources = sources.len() as u64;
    for name in &sources {
        out.bytes_before +=
            file_len(&layout::data_path(dir, name)) + file_len(&layout::index_path(dir, name));
    }
    let name = format!("{}.k{}", layout::claim_base(), layout::now_ns());
    let manifest = dir.join(format!("{MANIFEST_PREFIX}{name}"));
    let replaced = !live.is_empty();
    if replaced {
        let stopped = !write_set(
            dir,
            mode,
            &name,
            &reader,
            &live,
            &truncations.0,
            &sources,
            out,
            budget,
        )?;
        if stopped {
            return Ok(());
        }
    } else {
        layout::replace_file(dir, &manifest, &encode_manifest(false, &sources))?;
        if !budget.step() {
            return Ok(());
        }
    }
    // 4. remove the sources, index log first.
    for s in &sources {
        for path in [
            layout::index_path(dir, s),
            layout::data_path(dir, s),
            layout::meta_path(dir, s),
        ] {
            if !budget.step() {
                return Ok(());
            }
            if remove_if_there(&path)? {
                out.files_removed += 1;
            }
        }
    }
    layout::sync_dir(dir)?;
    // 5. drop the truncations nothing needs any more.
    if !budget.step() {
        return Ok(());
    }
    out.truncations_dropped = prune_truncations(dir, &truncations.0)?;
    // 6. the manifest goes last.
    if !budget.step() {
        return Ok(());
    }
    remove_if_there(&manifest)?;
    layout::sync_dir(dir)?;
    out.writer = replaced.then_some(name);
    Ok(())
}

/// An index log worth rewriting for its own sake: one record per small append (a log
/// file opened, appended to and closed again and again) leaves an index larger than
/// a quarter of its data; compacted, it is a record or two.
fn index_heavy(index_bytes: u64, data_bytes: u64) -> bool {
    index_bytes > HEAVY_INDEX_MIN && index_bytes.saturating_mul(4) > data_bytes
}

/// Index bytes below which a log's index is never rewritten for its own sake.
const HEAVY_INDEX_MIN: u64 = 16 << 10;

/// A lone ended writer is rewritten only when a truncation it has not seen may have
/// cut something of it.
fn single_has_dead(dir: &Path, sources: &[String], truncations: &[Truncation]) -> bool {
    let [name] = sources else {
        return false;
    };
    let meta = WriterMeta::read(&layout::meta_path(dir, name));
    match (meta, truncations.last()) {
        (Some(m), Some(t)) => m.first_key != 0 && m.first_key < t.key && m.clipped < t.key,
        (None, _) => file_len(&layout::index_path(dir, name)) > layout::LOG_HEADER as u64,
        _ => false,
    }
}

fn damaged(dir: &Path, d: &layout::Damage) -> ContainerError {
    ContainerError::Invalid(format!(
        "{}: not compacted: damaged ({d}); see `patio container check`",
        dir.display()
    ))
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

fn remove_if_there(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ContainerError::io(path, e)),
    }
}

/// One live run of the sources: `(logical, length, chunk, physical)`, grouped by the
/// key of the write it comes from.
type Live = BTreeMap<u64, Vec<(u64, u64, usize, u64)>>;

/// The oldest record key of the logs that are not `sources` (`u64::MAX` when they
/// have none; 0 when one cannot be told without reading its index).
fn oldest_kept_key(dir: &Path, sources: &[String]) -> Result<u64> {
    let mut oldest = u64::MAX;
    for name in layout::list_writers(dir)? {
        if sources.contains(&name) {
            continue;
        }
        match WriterMeta::read(&layout::meta_path(dir, &name)) {
            Some(m) if m.first_key == 0 => {}
            Some(m) => oldest = oldest.min(m.first_key),
            None => {
                // A writer that has not flushed yet writes only later keys; one whose
                // meta is damaged could hold any.
                if file_len(&layout::index_path(dir, &name)) > layout::LOG_HEADER as u64 {
                    return Ok(0);
                }
            }
        }
    }
    Ok(oldest)
}

/// Moves the runs of every key older than `barrier` under the newest such key.
fn merge_keys(live: Live, barrier: u64) -> Live {
    let Some(&top) = live.keys().rev().find(|&&k| k < barrier) else {
        return live;
    };
    let mut out = Live::new();
    for (key, runs) in live {
        let k = if key < barrier { top } else { key };
        out.entry(k).or_default().extend(runs);
    }
    for runs in out.values_mut() {
        runs.sort_unstable_by_key(|r| r.0);
    }
    out
}

/// Every live byte range of the reader, split at the writes it comes from.
fn live_extents(reader: &Reader) -> Live {
    // Per chunk: (physical start, physical end, key) of every write, by start.
    let mut spans: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); reader.writers().len()];
    for (chunk, key, e) in reader.writes() {
        spans[chunk as usize].push((e.physical, e.physical + e.length, key));
    }
    for s in &mut spans {
        s.sort_unstable();
    }
    let mut live = Live::new();
    let size = reader.size();
    let mut x = 0u64;
    while x < size {
        match reader.lookup(x) {
            Lookup::Data {
                chunk,
                physical,
                len,
            } => {
                let s = &spans[chunk as usize];
                let at = s.partition_point(|&(start, _, _)| start <= physical);
                let (_, end, key) = s[at.checked_sub(1).expect("live bytes come from a write")];
                let n = len.min(size - x).min(end - physical).max(1);
                let runs = live.entry(key).or_default();
                match runs.last_mut() {
                    Some(last)
                        if last.2 == chunk as usize
                            && last.0 + last.1 == x
                            && last.3 + last.1 == physical =>
                    {
                        last.1 += n
                    }
                    _ => runs.push((x, n, chunk as usize, physical)),
                }
                x += n;
            }
            Lookup::Hole { len } => x += len.max(1),
            Lookup::Unmapped => break,
        }
    }
    live
}

/// Steps 1–3: writes the new log set and publishes it; false when stopped early.
#[allow(clippy::too_many_arguments)]
fn write_set(
    dir: &Path,
    mode: IndexMode,
    name: &str,
    reader: &Reader,
    live: &Live,
    truncations: &[Truncation],
    sources: &[String],
    out: &mut Compacted,
    budget: &mut Steps,
) -> Result<bool> {
    let tmp_data = dir.join(format!("{TEMP_PREFIX}data.{name}"));
    let tmp_index = dir.join(format!("{TEMP_PREFIX}index.{name}"));
    let create = |p: &Path| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(p)
            .map_err(|e| ContainerError::io(p, e))
    };
    let data = create(&tmp_data)?;
    let mut index = create(&tmp_index)?;
    let mut log = layout::index_log_header().to_vec();
    let detector = Detector::default();
    let mut physical = 0u64;
    let mut buf = Vec::new();
    let mut meta = WriterMeta {
        clipped: truncations.last().map_or(0, |t| t.key),
        ..WriterMeta::default()
    };
    let total: u64 = live.values().flatten().map(|r| r.1).sum();
    let mut reported = 0u64;
    budget.reached(Stage::Copying { done: 0, total });
    for (&key, runs) in live {
        for group in runs.chunks(DEFAULT_INDEX_BUFFER) {
            let mut entries: Vec<IndexEntry> = Vec::with_capacity(group.len());
            for &(logical, length, chunk, from) in group {
                let mut done = 0u64;
                while done < length {
                    let n = (length - done).min(8 << 20) as usize;
                    buf.resize(n, 0);
                    reader.read_data(chunk, from + done, &mut buf)?;
                    data.write_all_at(&buf, physical + done)
                        .map_err(|e| ContainerError::io(&tmp_data, e))?;
                    done += n as u64;
                    let copied = physical + done;
                    if copied - reported >= COPY_REPORT || copied == total {
                        reported = copied;
                        budget.reached(Stage::Copying {
                            done: copied,
                            total,
                        });
                    }
                }
                let entry = IndexEntry {
                    logical,
                    length,
                    physical,
                };
                // Runs that meet logically are contiguous in the new data log too.
                match entries.last_mut() {
                    Some(last) if last.continued_by(&entry) => last.length += length,
                    _ => entries.push(entry),
                }
                physical += length;
                meta.end = meta.end.max(logical + length);
                meta.bytes += length;
            }
            meta.writes += entries.len() as u64;
            let payload = record::encode(mode, key, entries.len() as u64, &entries, &detector);
            put_frame(&mut log, &payload);
            out.records += 1;
        }
        if meta.first_key == 0 {
            meta.first_key = key;
        }
        meta.last_key = key;
    }
    out.live_bytes = physical;
    meta.index_len = log.len() as u64;
    // 1. both logs durable under temporary names.
    index
        .write_all(&log)
        .map_err(|e| ContainerError::io(&tmp_index, e))?;
    data.sync_all()
        .map_err(|e| ContainerError::io(&tmp_data, e))?;
    index
        .sync_all()
        .map_err(|e| ContainerError::io(&tmp_index, e))?;
    out.bytes_after = physical + log.len() as u64;
    layout::replace_file(
        dir,
        &dir.join(format!("{MANIFEST_PREFIX}{name}")),
        &encode_manifest(true, sources),
    )?;
    if !budget.step() {
        return Ok(false);
    }
    // 2. data log and meta under their final names.
    let rename =
        |from: &Path, to: &Path| fs::rename(from, to).map_err(|e| ContainerError::io(to, e));
    rename(&tmp_data, &layout::data_path(dir, name))?;
    meta.write(&layout::meta_path(dir, name))?;
    File::open(layout::meta_path(dir, name))
        .and_then(|f| f.sync_all())
        .map_err(|e| ContainerError::io(layout::meta_path(dir, name), e))?;
    layout::sync_dir(dir)?;
    if !budget.step() {
        return Ok(false);
    }
    // 3. publish.
    rename(&tmp_index, &layout::index_path(dir, name))?;
    layout::sync_dir(dir)?;
    Ok(budget.step())
}

/// Rewrites the truncation log without the truncations of `seen` (read before the
/// compaction) that no record left needs: one is needed when a record of a log that
/// was not compacted is older than it, and the newest always stays (it holds the
/// size). Truncations appended meanwhile stay; appends wait for the rewrite.
fn prune_truncations(dir: &Path, seen: &[Truncation]) -> Result<u64> {
    if seen.len() < 2 {
        return Ok(0);
    }
    let _lock = FileLock::acquire(dir, layout::TRUNCATES_LOCK, LockKind::Exclusive)?;
    let (now, damage) = layout::read_truncations(dir)?;
    if !damage.is_empty() || now.is_empty() {
        return Ok(0);
    }
    // The oldest key after which some log still needs truncations: a log's records
    // are cut by every truncation keyed after its first record, except those its
    // compaction applied already (up to its clipped key). A compacted log set needs
    // every truncation after its clipped key, even when all its records are older:
    // they are the truncations its compaction did not see.
    let mut oldest = u64::MAX;
    for name in layout::list_writers(dir)? {
        match WriterMeta::read(&layout::meta_path(dir, &name)) {
            Some(m) if m.first_key == 0 => {}
            Some(m) => oldest = oldest.min(m.first_key.max(m.clipped)),
            None => {
                if file_len(&layout::index_path(dir, &name)) > layout::LOG_HEADER as u64 {
                    return Ok(0);
                }
            }
        }
    }
    let newest = now.last().expect("not empty").key;
    let keep: Vec<Truncation> = now
        .iter()
        .copied()
        .filter(|t| t.key == newest || t.key > oldest || !seen.contains(t))
        .collect();
    let dropped = (now.len() - keep.len()) as u64;
    if dropped > 0 {
        layout::replace_file(
            dir,
            &dir.join(layout::TRUNCATES),
            &layout::encode_truncations(&keep),
        )?;
    }
    Ok(dropped)
}

/// The manifest: whether a new log set replaces the sources (else nothing of them
/// was live), and the sources' names.
fn encode_manifest(replaced: bool, sources: &[String]) -> Vec<u8> {
    let mut p = vec![replaced as u8];
    put_uvarint(&mut p, sources.len() as u64);
    for s in sources {
        put_uvarint(&mut p, s.len() as u64);
        p.extend_from_slice(s.as_bytes());
    }
    write_blob(MANIFEST_MAGIC, MANIFEST_VERSION, &p)
}

fn decode_manifest(path: &Path, bytes: &[u8]) -> Result<(bool, Vec<String>)> {
    let fail = |e| ContainerError::in_file(path, e);
    let (_, p) = read_blob(MANIFEST_MAGIC, MANIFEST_VERSION, bytes).map_err(fail)?;
    let mut c = Cursor::new(p);
    let replaced = match c.u8().map_err(fail)? {
        0 => false,
        1 => true,
        _ => {
            return Err(ContainerError::Corrupt {
                path: path.display().to_string(),
                offset: 0,
                reason: "unknown manifest kind".into(),
            })
        }
    };
    let n = c.count(1 << 24, "sources").map_err(fail)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let len = c.count(4096, "name length").map_err(fail)?;
        let name = c.take(len).map_err(fail)?;
        let name = String::from_utf8_lossy(name).into_owned();
        if name.contains('/') || name.is_empty() {
            return Err(ContainerError::Corrupt {
                path: path.display().to_string(),
                offset: c.position() as u64,
                reason: "writer name with a slash".into(),
            });
        }
        out.push(name);
    }
    Ok((replaced, out))
}

fn has_leftovers(dir: &Path) -> Result<bool> {
    Ok(writers_and_leftovers(dir)?.1)
}

/// The container's writers (sorted, as [`layout::list_writers`]) and whether an
/// interrupted compaction left files, in one listing.
pub(crate) fn writers_and_leftovers(dir: &Path) -> Result<(Vec<String>, bool)> {
    layout::list_writers_and(dir, |n| {
        n.starts_with(MANIFEST_PREFIX) || n.starts_with(TEMP_PREFIX)
    })
}

/// Cleans what an interrupted compaction left (when no compaction is running and
/// there is something to clean); returns the files removed. Writers call it when
/// they open.
pub fn recover(dir: &Path) -> Result<u64> {
    if !has_leftovers(dir)? {
        return Ok(0);
    }
    match FileLock::try_acquire(dir, layout::COMPACT_LOCK, LockKind::TryExclusive)? {
        Some(_lock) => recover_locked(dir),
        None => Ok(0),
    }
}

/// [`recover`] under the compaction lock.
fn recover_locked(dir: &Path) -> Result<u64> {
    let mut removed = 0u64;
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ContainerError::io(dir, e))? {
        let entry = entry.map_err(|e| ContainerError::io(dir, e))?;
        entries.push(entry.file_name().to_string_lossy().into_owned());
    }
    for n in &entries {
        if n.starts_with(TEMP_PREFIX) {
            removed += remove_if_there(&dir.join(n))? as u64;
        }
    }
    for n in &entries {
        let Some(name) = n.strip_prefix(MANIFEST_PREFIX) else {
            continue;
        };
        let manifest = dir.join(n);
        let bytes = fs::read(&manifest).map_err(|e| ContainerError::io(&manifest, e))?;
        let (replaced, sources) = decode_manifest(&manifest, &bytes)?;
        if !replaced || layout::index_path(dir, name).exists() {
            // Published (or nothing was live): finish removing the sources.
            for s in sources {
                if s == name {
                    continue;
                }
                for path in [
                    layout::index_path(dir, &s),
                    layout::data_path(dir, &s),
                    layout::meta_path(dir, &s),
                ] {
                    removed += remove_if_there(&path)? as u64;
                }
            }
        } else {
            // Never published: the new set goes.
            for path in [layout::data_path(dir, name), layout::meta_path(dir, name)] {
                removed += remove_if_there(&path)? as u64;
            }
        }
        layout::sync_dir(dir)?;
        removed += remove_if_there(&manifest)? as u64;
    }
    if removed > 0 {
        layout::sync_dir(dir)?;
    }
    Ok(removed)
}
