//! Serving one dataset's reads from its layout replicas without Python (the VOL
//! connector, through [`crate::capi_serve`]): the replicas the knowledge base lists as
//! `ready` for the dataset, each checked the way `patio.h5` checks them, and what each
//! holds, for a [`Decider`]; the storage model and eq 3.1's constants the knowledge base
//! records (`setting` key `device`, which `patio layout build` stores); replicas found
//! missing, unreadable or older than their source marked so in the knowledge base; and
//! the reads each replica served counted (`replica.uses`, which `patio layout status`
//! reports as `served_reads`, whichever front end served them): the counts of a set are
//! appended, when it closes, to the knowledge base's record logs as a log of their own
//! (record log version 2, a `served` frame; docs/FORMATS.md "Record log"), which the next
//! merge adds to `replica` - no write transaction and no `fsync` in the reading process.
//!
//! A replica is current when the source's version (patio-core's [`FileVersion`]: device,
//! inode, size, modification and change times) equals the one recorded at its build, or,
//! when only the version moved, when the CRC-32 of the byte ranges the dataset occupies
//! and their number still equal the recorded ones (`patio.layout.storage.fingerprint`):
//! then the new version is recorded, as `patio.h5` does. Anything else is stale and never
//! served.
//!
//! The database is opened the way `patio.layout.kb` opens it: SQLite's `unix-dotfile`
//! VFS (a lock is the directory `kb.sqlite.lock`, atomic on every file system), rollback
//! journal, short write transactions; a busy database makes serving wait at most
//! [`BUSY_MS`], after which the reads go to the original. Opening a set reads the
//! schema version, the replica rows and the device setting without the lock when that
//! read can be trusted (checked like a sequence lock, as `patio.layout.kb` reads at
//! open: `read_unlocked`), else in one read transaction (the VFS takes and drops its
//! lock directory once per transaction: a `mkdir` and `rmdir` each, milliseconds on a
//! loaded disk), for every dataset at once: the process keeps
//! what it read (a snapshot: the ready replicas' rows by dataset and the device
//! setting) with the database file's state then ([`kb_state`]: device, inode, size,
//! modification and change times, and SQLite's header with the file change counter,
//! which every committed write transaction increments). While the state stays, sets are
//! made from the snapshot and the database is opened only to mark a replica (missing,
//! stale, damaged, a new source version); any write to it changes the state, and the
//! next set reads anew.

use crate::decide::{Decider, Holds, Replica};
use crate::error::{LayoutError, Result};
use crate::kblog::kb_dir;
use crate::layout::Layout;
use crate::price::Constants;
use crate::selection::Axis;
use patio_core::seqcodec::decode_seq;
use patio_core::FileVersion;
use patio_storage::Striping;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

mod served;
pub use served::{served_log, write_served_log, Served, SERVED_LOG_VERSION};

/// The newest knowledge-base schema this code reads (`meta.schema_version`).
pub const SCHEMA_VERSION: i64 = 2;
/// How long serving waits for a busy knowledge base.
pub const BUSY_MS: u64 = 2_000;
/// eq 3.1's decompression constant when none was measured (`cost.DEFAULT_T_DEC`).
pub const DEFAULT_T_DEC: f64 = 1.0 / 300e6;

/// A ready replica of the dataset, as the knowledge base lists it.
#[derive(Clone, Debug)]
pub struct KbReplica {
    pub id: i64,
    pub kind: String,
    pub path: PathBuf,
    pub holds: Holds,
    /// The source generation recorded at its build (`replica.source`).
    source: Map<String, Value>,
}

/// One dataset's replicas, ready to serve, and the knowledge base they came from.
pub struct ServeSet {
    /// Opened when a replica's row is written (None: the set came from the snapshot).
    db: Option<Connection>,
    source: PathBuf,
    pub dset: String,
    /// The source's version when the set was made (reads check it stays so).
    pub version: FileVersion,
    pub replicas: Vec<KbReplica>,
    pub model: Striping,
    pub consts: Constants,
    /// Per replica: reads served and modelled seconds saved, not yet recorded.
    uses: Vec<(u64, f64)>,
    /// The process `uses` were counted in (a forked child starts its own at zero: the
    /// counts it inherited are its parent's to record).
    pid: u32,
    /// One line per replica left out, for the caller to report.
    pub notes: Vec<String>,
}

fn kb_err(path: &Path, e: impl std::fmt::Display) -> LayoutError {
    LayoutError::Layout(format!("knowledge base {}: {e}", path.display()))
}

/// What says a knowledge base file has not changed: its identity (device, inode, size,
/// modification and change times in ns, little-endian) followed by bytes 24..100 of its
/// header (SQLite's file change counter, page count, schema cookie, ...), when it is a
/// rollback-journal database with no journal beside it. None: a write in progress, a
/// killed writer's hot journal, no such database. The one rule every reader of the
/// knowledge base applies, to trust a read made without the lock (the state equal
/// before and after it) and to reuse what an earlier read found (the state equal now);
/// Python's `patio.layout.kb` asks it through `patio._native.layout_kb_state`.
pub fn kb_state(path: &Path) -> Option<Vec<u8>> {
    let f = File::open(path).ok()?;
    let mut head = [0u8; 100];
    f.read_exact_at(&mut head, 0).ok()?;
    let m = f.metadata().ok()?;
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    if std::fs::symlink_metadata(&journal).is_ok()
        || &head[..16] != b"SQLite format 3\0"
        || head[18] != 1
    {
        return None;
    }
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    let mut state = Vec::with_capacity(5 * 8 + 76);
    for v in [
        m.dev() as i64,
        m.ino() as i64,
        m.size() as i64,
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    ] {
        state.extend_from_slice(&v.to_le_bytes());
    }
    state.extend_from_slice(&head[24..]);
    Some(state)
}

type RowTuple = (i64, String, String, Option<Vec<u8>>, String, String);
type DeviceSetting = Result<(Striping, Constants)>;

/// What one read of a knowledge base found, with the database's identity before it.
#[derive(Clone)]
struct Snapshot {
    path: PathBuf,
    id: Vec<u8>,
    /// The ready replicas' rows by dataset, ascending id.
    ready: HashMap<String, Vec<RowTuple>>,
    /// The device setting (read when there is any ready replica).
    device: DeviceSetting,
}

/// This process's snapshots, one per knowledge base read.
static SNAPSHOTS: Mutex<Vec<Snapshot>> = Mutex::new(Vec::new());

/// The ready rows of `dset` and the device setting from the snapshot of the database
/// at `path`, when it is unchanged since.
fn from_snapshot(path: &Path, dset: &str) -> Option<(Vec<RowTuple>, DeviceSetting)> {
    let now = kb_state(path)?;
    let snaps = SNAPSHOTS.lock().unwrap_or_else(|e| e.into_inner());
    let s = snaps.iter().find(|s| s.path == path && s.id == now)?;
    let rows = s.ready.get(dset).cloned().unwrap_or_default();
    Some((rows, s.device.clone()))
}

/// Every dataset's ready replicas and the device setting (read when there is any ready
/// replica), through `db`.
fn read_all(
    db: &Connection,
    path: &Path,
) -> Result<(HashMap<String, Vec<RowTuple>>, DeviceSetting)> {
    check_schema(db, path)?;
    let mut ready: HashMap<String, Vec<RowTuple>> = HashMap::new();
    let mut q = db
        .prepare(
            "SELECT dset, id, kind, params, points, path, source FROM replica \
             WHERE state='ready' ORDER BY id",
        )
        .map_err(|e| kb_err(path, e))?;
    let rows = q
        .query_map([], |r| {
            let row: RowTuple = (
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            );
            Ok((r.get::<_, String>(0)?, row))
        })
        .map_err(|e| kb_err(path, e))?;
    for r in rows {
        let (dset, row) = r.map_err(|e| kb_err(path, e))?;
        ready.entry(dset).or_default().push(row);
    }
    let device = if ready.is_empty() {
        Err(kb_err(path, "no ready replica"))
    } else {
        device(db, path)
    };
    Ok((ready, device))
}

/// [`read_all`] without the database's lock, as `patio.layout.kb` reads it at open:
/// like a sequence lock - the header's state read and the journal's absence checked
/// before and after a read through a read-only connection that takes no lock (SQLite's
/// `unix-none` VFS). In rollback-journal mode every write to the database file happens
/// while its journal exists and every commit advances the change counter, so a write
/// overlapping the read shows at one of the two checks. None: not trusted (any
/// difference or SQLite error); the caller reads under the lock.
fn read_unlocked(path: &Path) -> Option<(HashMap<String, Vec<RowTuple>>, DeviceSetting)> {
    let before = kb_state(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags_and_vfs(path, flags, c"unix-none").ok()?;
    let found = read_all(&db, path).ok()?;
    drop(db);
    (kb_state(path)? == before).then_some(found)
}

/// Reads the database at `path` (None: there is none) - without its lock when that
/// read can be trusted, else in one read transaction - and keeps the snapshot; the
/// connection comes back when one was opened with the lock.
fn read_snapshot(path: &Path) -> Result<Option<(Option<Connection>, Snapshot)>> {
    if !path.is_file() {
        return Ok(None);
    }
    // Taken before the reads: a change after it is seen as a change next time.
    let before = kb_state(path);
    let (db, (ready, device)) = match read_unlocked(path) {
        Some(found) => (None, found),
        None => {
            let Some((db, path)) = connect(path.to_path_buf())? else {
                return Ok(None);
            };
            // Its first statement needs no schema, so the schema is loaded under the
            // same lock (preparing a statement that needs it outside a transaction
            // takes the lock again).
            let tx = db.unchecked_transaction().map_err(|e| kb_err(&path, e))?;
            db.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0))
                .map_err(|e| kb_err(&path, e))?;
            let found = read_all(&db, &path)?;
            tx.commit().map_err(|e| kb_err(&path, e))?;
            (Some(db), found)
        }
    };
    let snap = Snapshot {
        path: path.to_path_buf(),
        id: before.clone().unwrap_or_default(),
        ready,
        device,
    };
    if before.is_some() {
        let mut snaps = SNAPSHOTS.lock().unwrap_or_else(|e| e.into_inner());
        snaps.retain(|s| s.path != path);
        snaps.push(snap.clone());
    }
    Ok(Some((db, snap)))
}

/// The knowledge base database of `source`.
fn kb_path(source: &Path) -> PathBuf {
    kb_dir(source).join("kb.sqlite")
}

/// The knowledge base at `path` (see [`kb_path`]), opened as `patio.layout.kb` opens it
/// (None: there is none); its schema version is checked by [`check_schema`], inside the
/// caller's transaction.
fn connect(path: PathBuf) -> Result<Option<(Connection, PathBuf)>> {
    if !path.is_file() {
        return Ok(None);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags_and_vfs(&path, flags, c"unix-dotfile")
        .map_err(|e| kb_err(&path, e))?;
    db.busy_timeout(std::time::Duration::from_millis(BUSY_MS))
        .map_err(|e| kb_err(&path, e))?;
    Ok(Some((db, path)))
}

/// Ok when the database's schema is one this code reads.
fn check_schema(db: &Connection, path: &Path) -> Result<()> {
    let version: Option<String> = db
        .query_row(
            "SELECT value FROM meta WHERE key='schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| kb_err(path, e))?;
    match version.as_deref().map(str::parse::<i64>) {
        Some(Ok(v)) if v <= SCHEMA_VERSION => Ok(()),
        Some(Ok(v)) => Err(kb_err(
            path,
            format!("schema version {v} is newer than this patio's {SCHEMA_VERSION}"),
        )),
        _ => Err(kb_err(path, "damaged (no schema version)")),
    }
}

/// JSON as Python's `json` writes it: `Infinity`/`NaN` (no JSON) read as null.
fn parse_json(text: &str) -> Option<Value> {
    let cleaned = text
        .replace("-Infinity", "null")
        .replace("Infinity", "null")
        .replace("NaN", "null");
    serde_json::from_str(&cleaned).ok()
}

/// The storage model of a `device` setting's `store` (`StorageModel.params()`), with
/// the Lustre-like preset's value for any parameter it lacks.
fn striping_of(store: &Map<String, Value>) -> Result<Striping> {
    let mut s = Striping::lustre();
    // Python writes an unbounded bandwidth as `Infinity` (read as null here).
    let num = |k: &str, default: f64| match store.get(k) {
        Some(Value::Null) if k == "bandwidth" => f64::INFINITY,
        Some(v) => v.as_f64().unwrap_or(f64::NAN),
        None => default,
    };
    let int = |k: &str, default: u64| store.get(k).and_then(Value::as_u64).unwrap_or(default);
    s.targets = int("targets", s.targets as u64) as usize;
    s.stripe_size = int("stripe_size", s.stripe_size);
    s.rpc_size = int("rpc_size", s.rpc_size);
    s.page_size = int("page_size", s.page_size);
    s.latency_seq = num("latency_seq", s.latency_seq);
    s.latency_near = num("latency_near", s.latency_near);
    s.latency_mid = num("latency_mid", s.latency_mid);
    s.latency_far = num("latency_far", s.latency_far);
    s.bandwidth = num("bandwidth", s.bandwidth);
    s.request_latency = num("request_latency", s.request_latency);
    s.jitter = num("jitter", s.jitter);
    s.seed = int("seed", s.seed);
    s.whole_rpc = store
        .get("whole_rpc")
        .and_then(Value::as_bool)
        .unwrap_or(s.whole_rpc);
    s.validate()
        .map_err(|e| LayoutError::Storage(e.to_string()))?;
    Ok(s)
}

fn device(db: &Connection, path: &Path) -> Result<(Striping, Constants)> {
    let text: Option<String> = db
        .query_row("SELECT value FROM setting WHERE key='device'", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(|e| kb_err(path, e))?;
    let Some(text) = text else {
        return Err(kb_err(
            path,
            "no storage model recorded (`patio layout build` or `patio layout probe FILE` records one)",
        ));
    };
    let v = parse_json(&text).ok_or_else(|| kb_err(path, "the device setting is not JSON"))?;
    let store = v.get("store").and_then(Value::as_object);
    let c = v.get("constants").and_then(Value::as_object);
    let (Some(store), Some(c)) = (store, c) else {
        return Err(kb_err(
            path,
            "the device setting lacks its store or constants",
        ));
    };
    let get = |k: &str| c.get(k).and_then(Value::as_f64);
    let consts = match (get("t_pg"), get("t_chk"), get("t_lat")) {
        (Some(t_pg), Some(t_chk), Some(t_lat)) => Constants {
            t_pg,
            t_chk,
            t_lat,
            t_dec: get("t_dec").unwrap_or(DEFAULT_T_DEC),
        },
        _ => return Err(kb_err(path, "the device setting lacks a constant")),
    };
    Ok((striping_of(store)?, consts))
}

fn decode_ints(blob: &[u8]) -> Result<Vec<u64>> {
    let seq = decode_seq(blob).map_err(|e| LayoutError::Layout(format!("index blob: {e}")))?;
    seq.expand()
        .into_iter()
        .map(|v| u64::try_from(v).map_err(|_| LayoutError::Layout("negative index".into())))
        .collect()
}

fn perm_of(params: &Value, rank: usize) -> Option<Vec<usize>> {
    match params.get("axes") {
        Some(a) => a
            .as_array()?
            .iter()
            .map(|x| x.as_u64().map(|v| v as usize))
            .collect(),
        None => Some((0..rank).collect()),
    }
}

/// What a replica row holds (None: a kind this code does not serve).
fn holds_of(kind: &str, params: &Value, points: Option<&[u8]>) -> Result<Option<Holds>> {
    Ok(match kind {
        "chunked" | "zorder" | "hilbert" => Some(Holds::Everything),
        "transposed" => params
            .get("axes")
            .and_then(|_| perm_of(params, 0))
            .map(|perm| Holds::Transposed { perm }),
        "concat" => {
            if let Some(sets) = params.get("axes_sets").and_then(Value::as_array) {
                let mut axes = Vec::with_capacity(sets.len());
                for h in sets {
                    let bytes = h
                        .as_str()
                        .and_then(hex_bytes)
                        .ok_or_else(|| LayoutError::Layout("axes_sets: not hex".into()))?;
                    axes.push(Axis::from_sorted_indices(&decode_ints(&bytes)?)?);
                }
                perm_of(params, axes.len()).map(|perm| Holds::Product { sets: axes, perm })
            } else if let Some(blob) = points {
                let mut linear = decode_ints(blob)?;
                linear.sort_unstable();
                Some(Holds::Points { linear })
            } else {
                None
            }
        }
        _ => None,
    })
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn version_map(v: &FileVersion) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("dev".into(), v.dev.into());
    m.insert("ino".into(), v.ino.into());
    m.insert("size".into(), v.size.into());
    m.insert("mtime_ns".into(), (v.mtime_ns as i64).into());
    m.insert("ctime_ns".into(), (v.ctime_ns as i64).into());
    m
}

/// True when every key of the version equals the recorded one.
fn same_version(now: &Map<String, Value>, recorded: &Map<String, Value>) -> bool {
    now.iter().all(|(k, v)| recorded.get(k) == Some(v))
}

/// The byte ranges `layout` occupies in its file, ascending (`storage.storage_ranges`).
pub fn storage_ranges(layout: &Layout) -> Vec<(u64, u64)> {
    let chunk_bytes = layout.chunk.iter().product::<u64>() * layout.itemsize;
    if layout.contiguous {
        let n = layout.shape.iter().product::<u64>() * layout.itemsize;
        return match layout.addresses.first() {
            Some(Some(base)) if n > 0 => vec![(*base, n)],
            _ => Vec::new(),
        };
    }
    let mut out: Vec<(u64, u64)> = layout
        .addresses
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let size = layout.stored.as_ref().map_or(chunk_bytes, |s| s[i]);
            a.map(|a| (a, size))
        })
        .collect();
    out.sort_by_key(|r| r.0);
    out
}

/// CRC-32 (zlib's) of the file's bytes in `ranges`.
pub fn ranges_crc(path: &Path, ranges: &[(u64, u64)]) -> std::io::Result<u32> {
    let mut f = File::open(path)?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 8 << 20];
    for &(off, len) in ranges {
        f.seek(SeekFrom::Start(off))?;
        let mut left = len;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let got = f.read(&mut buf[..want])?;
            if got == 0 {
                break;
            }
            h.update(&buf[..got]);
            left -= got as u64;
        }
    }
    Ok(h.finalize())
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl ServeSet {
    /// The ready replicas of `dset` in `source`'s knowledge base (None: no knowledge
    /// base, or no ready replica of the dataset), from this process's snapshot while the
    /// database is unchanged. Replicas whose file is gone are marked `missing` and left out (a note
    /// each); those whose holdings cannot be read are left out with a note.
    pub fn open(source: &Path, dset: &str) -> Result<Option<ServeSet>> {
        let path = kb_path(source);
        let (db, rows, device) = match from_snapshot(&path, dset) {
            Some((rows, device)) => (None, rows, device),
            None => match read_snapshot(&path)? {
                Some((db, mut snap)) => {
                    let rows = snap.ready.remove(dset).unwrap_or_default();
                    (db, rows, snap.device)
                }
                None => return Ok(None),
            },
        };
        if rows.is_empty() {
            return Ok(None);
        }
        let (model, consts) = device?;
        let version = FileVersion::of(source)
            .map_err(|e| LayoutError::Layout(format!("{}: {e}", source.display())))?;
        let mut set = ServeSet {
            db,
            source: source.to_path_buf(),
            dset: dset.to_string(),
            version,
            replicas: Vec::new(),
            model,
            consts,
            uses: Vec::new(),
            pid: std::process::id(),
            notes: Vec::new(),
        };
        for (id, kind, params, points, file, src) in rows {
            let file = PathBuf::from(file);
            if !file.is_file() {
                set.mark(id, "missing", "replica file not found");
                set.notes.push(format!(
                    "replica {id} of {dset} is missing ({}); reading the original",
                    file.display()
                ));
                continue;
            }
            let params = parse_json(&params).unwrap_or(Value::Null);
            let holds = holds_of(&kind, &params, points.as_deref());
            let source = parse_json(&src).and_then(|v| v.as_object().cloned());
            match (holds, source) {
                (Ok(Some(holds)), Some(source)) => set.replicas.push(KbReplica {
                    id,
                    kind,
                    path: file,
                    holds,
                    source,
                }),
                (Ok(None), _) => {}
                (Err(e), _) => set.notes.push(format!("replica {id} of {dset}: {e}")),
                (_, None) => set
                    .notes
                    .push(format!("replica {id} of {dset}: no source generation")),
            }
        }
        set.uses = vec![(0, 0.0); set.replicas.len()];
        Ok(Some(set))
    }

    /// A decider over the original (its `layout` in the source) and the current
    /// replicas whose layouts are given (`layouts[i]` for `replicas[i]`; None: its file
    /// could not be read, marked `damaged`), and, per decider replica, its index in
    /// `replicas`. Replicas older than the source are marked `stale` and left out.
    pub fn decider(
        &mut self,
        original: &Layout,
        layouts: &[Option<Layout>],
    ) -> Result<(Decider, Vec<usize>)> {
        let now = version_map(&self.version);
        let mut fresh: Option<(u32, usize)> = None;
        let mut d = Decider::new(
            original.clone(),
            Vec::new(),
            self.model.clone(),
            self.consts,
        )?;
        let mut index = Vec::new();
        for i in 0..self.replicas.len() {
            let (id, dset) = (self.replicas[i].id, self.dset.clone());
            if !same_version(&now, &self.replicas[i].source) {
                if fresh.is_none() {
                    let ranges = storage_ranges(original);
                    let crc = ranges_crc(&self.source, &ranges).map_err(|e| {
                        LayoutError::Layout(format!("{}: {e}", self.source.display()))
                    })?;
                    fresh = Some((crc, ranges.len()));
                }
                let (crc, n) = fresh.unwrap_or_default();
                let rec = &self.replicas[i].source;
                let same = rec.get("crc").and_then(Value::as_u64) == Some(crc as u64)
                    && rec.get("ranges").and_then(Value::as_u64) == Some(n as u64);
                if !same {
                    self.mark(id, "stale", "source changed since the replica was built");
                    self.notes.push(format!(
                        "replica {id} of {dset} is older than its source; reading the original"
                    ));
                    continue;
                }
                let mut gen = now.clone();
                gen.insert("crc".into(), (crc as u64).into());
                gen.insert("ranges".into(), (n as u64).into());
                self.refresh(id, &Value::Object(gen));
            }
            let Some(layout) = layouts.get(i).cloned().flatten() else {
                self.mark(id, "damaged", "the replica file cannot be read as HDF5");
                self.notes.push(format!(
                    "replica {id} of {dset} is damaged ({}); reading the original",
                    self.replicas[i].path.display()
                ));
                continue;
            };
            let r = Replica {
                layout,
                holds: self.replicas[i].holds.clone(),
            };
            match d.add_replica(r) {
                Ok(()) => index.push(i),
                Err(e) => {
                    self.mark(id, "damaged", &e.to_string());
                    self.notes.push(format!(
                        "replica {id} of {dset} does not match its record ({e}); reading the original"
                    ));
                }
            }
        }
        Ok((d, index))
    }

    /// True while the source keeps the version the set was made for.
    pub fn current(&self) -> bool {
        FileVersion::of(&self.source).is_ok_and(|v| v == self.version)
    }

    /// Counts one read served (partly) from `replicas[i]`, saving `saved` modelled
    /// seconds.
    pub fn used(&mut self, i: usize, saved: f64) {
        self.own_counts();
        if let Some(u) = self.uses.get_mut(i) {
            u.0 += 1;
            u.1 += saved;
        }
    }

    /// In a forked child, the counts inherited are dropped (the parent records them).
    fn own_counts(&mut self) {
        let pid = std::process::id();
        if pid != self.pid {
            self.pid = pid;
            self.uses.iter_mut().for_each(|u| *u = (0, 0.0));
        }
    }

    /// Replica `replicas[i]` failed while serving: marked `damaged`.
    pub fn damaged(&mut self, i: usize, why: &str) {
        if let Some(r) = self.replicas.get(i) {
            let id = r.id;
            self.mark(id, "damaged", why);
        }
    }

    /// Records the counted reads (`uses`, `last_used`, `benefit`): appended to the
    /// knowledge base's record logs as a served log ([`served_log`]), which the next
    /// merge adds to the replicas' rows.
    pub fn flush(&mut self) -> Result<()> {
        self.own_counts();
        let t = now_seconds();
        let counts: Vec<Served> = self
            .replicas
            .iter()
            .zip(&self.uses)
            .filter(|(_, u)| u.0 > 0)
            .map(|(r, u)| Served {
                id: r.id,
                uses: u.0,
                benefit: u.1,
                last_used: t,
                path: r.path.to_string_lossy().into_owned(),
            })
            .collect();
        if counts.is_empty() {
            return Ok(());
        }
        let dir = kb_dir(&self.source).join("records");
        write_served_log(&dir, &counts)
            .map_err(|e| LayoutError::Layout(format!("{}: {e}", dir.display())))?;
        self.uses.iter_mut().for_each(|u| *u = (0, 0.0));
        Ok(())
    }

    /// The database, opened now when the set came from the snapshot (None: it cannot
    /// be; writes to it are best effort).
    fn db(&mut self) -> Option<&Connection> {
        if self.db.is_none() {
            self.db = connect(kb_path(&self.source))
                .ok()
                .flatten()
                .map(|(db, _)| db);
        }
        self.db.as_ref()
    }

    /// Sets a ready replica's state (best effort: a busy knowledge base leaves it, and
    /// the replica is left out of this process's decisions all the same).
    fn mark(&mut self, id: i64, state: &str, note: &str) {
        if let Some(db) = self.db() {
            let _ = db.execute(
                "UPDATE replica SET state=?1, note=?2 WHERE id=?3 AND state='ready'",
                params![state, note, id],
            );
        }
    }

    fn refresh(&mut self, id: i64, gen: &Value) {
        if let Some(db) = self.db() {
            let _ = db.execute(
                "UPDATE replica SET source=?1 WHERE id=?2",
                params![gen.to_string(), id],
            );
        }
    }
}

impl Drop for ServeSet {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Marks every ready replica of `dset` in `source`'s knowledge base stale (a write to
/// the dataset is about to change it). Ok when there is no knowledge base.
pub fn mark_dataset_stale(source: &Path, dset: &str, note: &str) -> Result<()> {
    let Some((mut db, path)) = connect(kb_path(source))? else {
        return Ok(());
    };
    let tx = db
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| kb_err(&path, e))?;
    check_schema(&tx, &path)?;
    tx.execute(
        "UPDATE replica SET state='stale', note=?1 WHERE dset=?2 AND state IN ('ready', 'building')",
        params![note, dset],
    )
    .map_err(|e| kb_err(&path, e))?;
    tx.commit().map_err(|e| kb_err(&path, e))
}

#[cfg(test)]
mod tests;
