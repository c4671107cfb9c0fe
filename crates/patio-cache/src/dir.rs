//! The cache directory of the segment-grouping cache: its checks, its lock (`flock`,
//! one cache per directory), the warm start from a saved table, saving the table, and
//! the work done in idle periods (rebuilding groups, writing groups not yet stored).

use crate::core::{lock, Cache, CacheConfig, FileState, Policy, State};
use crate::error::{CacheError, Result};
use crate::store::SegmentFile;
use crate::table::{self, SegmentRec, Table, TableError};
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

pub const SEGMENTS_FILE: &str = "segments.dat";
pub const LOCK_FILE: &str = "lock";

/// A path as shown in messages.
fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// A cache directory's problem as one line.
fn dir_error(dir: &Path, what: &str, e: io::Error) -> CacheError {
    let d = shown(dir);
    match e.raw_os_error() {
        Some(libc::EROFS) => {
            CacheError::Invalid(format!("cache directory {d} is on a read-only file system"))
        }
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            CacheError::Invalid(format!("cache directory {d}: no space left for {what}"))
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            CacheError::Invalid(format!("cache directory {d}: permission denied ({what})"))
        }
        _ => CacheError::io(format!("cache directory {d}: {what}"), e),
    }
}

/// Opens the cache directory `dir` for `cfg`: creates it, takes its lock, loads the
/// saved table when it matches (a warm start) and opens the slot file. Returns the
/// cache and, for a cold start over an unusable table, why.
pub fn open_cache(dir: Option<&Path>, cfg: &CacheConfig) -> Result<(Cache, Option<String>)> {
    cfg.check().map_err(CacheError::Invalid)?;
    let Some(dir) = dir.filter(|_| cfg.policy != Policy::None) else {
        return Ok((
            Cache {
                cfg: cfg.clone(),
                state: Mutex::new(State::new(cfg, 0)),
                store: None,
                dir: None,
                _lock: None,
            },
            None,
        ));
    };
    // A directory this start created goes again when the start fails (a full disk
    // leaves nothing behind).
    let created = !dir.exists();
    fs::create_dir_all(dir).map_err(|e| dir_error(dir, "creating it", e))?;
    let opened = open_existing(dir, cfg);
    if opened.is_err() && created {
        let _ = fs::remove_dir_all(dir);
    }
    opened
}

/// [`open_cache`] of the directory `dir`, which exists.
fn open_existing(dir: &Path, cfg: &CacheConfig) -> Result<(Cache, Option<String>)> {
    let dir = fs::canonicalize(dir).map_err(|e| dir_error(dir, "resolving it", e))?;
    let lockf = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| dir_error(&dir, "its lock file", e))?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::flock(lockf.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(CacheError::Invalid(format!(
            "cache directory {} is in use by another patio mount",
            shown(&dir)
        )));
    }
    let slots = cfg.slots() as u32;
    let mut note = None;
    let table = match Table::load(&dir) {
        Ok(Some(t))
            if t.slot_size == cfg.slot_size()
                && t.slots == slots
                && t.item_size == cfg.item
                && t.policy == cfg.policy.code() =>
        {
            Some(t)
        }
        Ok(Some(_)) => {
            note = Some("made with other settings (policy, sizes): starting cold".to_string());
            None
        }
        Ok(None) => None,
        Err(TableError::Newer(v)) => {
            return Err(CacheError::Invalid(format!(
                "cache directory {} was written by a newer patio (segment table format {v}); \
                 use another --cache-dir or remove it",
                shown(&dir)
            )))
        }
        Err(TableError::Damaged(why)) => {
            note = Some(format!("damaged segment table ({why}): starting cold"));
            None
        }
        Err(TableError::Io(e)) => return Err(dir_error(&dir, "reading its table", e)),
    };
    if table.is_none() {
        match fs::remove_file(dir.join(table::TABLE_FILE)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(dir_error(&dir, "removing the old table", e))
            }
            _ => {}
        }
    }
    let store =
        SegmentFile::open(&dir.join(SEGMENTS_FILE), cfg.slot_size(), slots).map_err(|e| {
            dir_error(
                &dir,
                &format!(
                    "the segment store ({slots} slots of {} bytes)",
                    cfg.slot_size()
                ),
                e,
            )
        })?;
    let mut state = State::new(cfg, slots);
    if let Some(t) = table {
        warm(&mut state, t);
    }
    Ok((
        Cache {
            cfg: cfg.clone(),
            state: Mutex::new(state),
            store: Some(store),
            dir: Some(dir),
            _lock: Some(lockf),
        },
        note,
    ))
}

/// Restores a saved table: its files (checked against SOURCE when opened) and slots
/// (plain ones read one item at a time, segments whole).
fn warm(st: &mut State, t: Table) {
    for (i, rec) in t.files.into_iter().enumerate() {
        st.by_id.insert((rec.dev, rec.ino), i as u32);
        st.files.push(FileState {
            rec,
            epoch: 0,
            pay: Default::default(),
            data: None,
            stat_file: None,
            open: 0,
        });
    }
    for seg in t.segments {
        if seg.plain && st.policy() == Policy::Group {
            // The item region's cells, in their slot's order (their ages are lost).
            let kept = seg
                .entries
                .into_iter()
                .filter(|e| st.plain.restore(seg.slot, *e))
                .count();
            if kept > 0 {
                st.stats.warm_items += kept as u64;
                st.alloc.touch(seg.slot);
            }
            continue;
        }
        let mut items = Vec::new();
        for e in seg.entries {
            st.disk.insert(e.item, (seg.slot, e));
            items.push(e.item);
        }
        st.stats.warm_items += items.len() as u64;
        st.slot_items.insert(seg.slot, items);
        st.alloc.touch(seg.slot);
    }
    if st.policy() == Policy::Group {
        // The item region gets every slot the restored segments do not hold within
        // the share.
        st.resize_region(0);
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Cache {
    /// The table of what the store holds now. Items of files changed within the last
    /// second are left out: a later change in the same timestamp tick could not be
    /// told apart after a restart.
    fn snapshot(&self, st: &mut State) -> Table {
        let racy = now_ns() - 1_000_000_000;
        let fresh = |f: &FileState| f.rec.mtime_ns < racy && f.rec.ctime_ns < racy;
        let mut segments: Vec<SegmentRec> = st
            .slot_items
            .keys()
            .chain(st.plain.slots())
            .map(|&slot| SegmentRec {
                slot,
                plain: st.plain.owns(slot) || self.cfg.policy == Policy::Lru,
                entries: st
                    .entries_of(slot)
                    .into_iter()
                    .filter(|e| fresh(&st.files[e.item.file as usize]))
                    .collect(),
            })
            .filter(|s| !s.entries.is_empty())
            .collect();
        segments.sort_by_key(|s| s.slot);
        st.stats.table_saves += 1;
        Table {
            generation: st.stats.table_saves,
            slot_size: self.cfg.slot_size(),
            slots: st.alloc.slots(),
            item_size: self.cfg.item,
            policy: self.cfg.policy.code(),
            files: st.files.iter().map(|f| f.rec.clone()).collect(),
            segments,
            counters: st.stats.named(),
        }
    }

    /// Saves the table if the store changed since the last save (the slot file is
    /// made durable first).
    pub fn save(&self) -> io::Result<()> {
        let (Some(dir), Some(store)) = (&self.dir, &self.store) else {
            return Ok(());
        };
        let mut table = {
            let mut st = lock(&self.state);
            if !st.dirty {
                return Ok(());
            }
            st.dirty = false;
            self.snapshot(&mut st)
        };
        store.sync()?;
        // Generations continue across runs.
        if let Ok(Some(old)) = Table::load(dir) {
            table.generation += old.generation;
        }
        table.save(dir)
    }

    /// In an idle period: rebuilds the groups if the graph changed, writes a few
    /// groups not yet stored as segments (the grouping I/O, reading SOURCE for what
    /// the cache does not hold, as far as what groups earned pays for it) and saves
    /// the table.
    /// The time it takes is counted (`idle_work_ns`): work done while nobody waits
    /// is still work a benchmark must charge.
    pub fn idle_work(&self) {
        let start = std::time::Instant::now();
        self.idle_steps();
        let spent = start.elapsed().as_nanos() as u64;
        lock(&self.state).stats.idle_work_ns += spent;
    }

    fn idle_steps(&self) {
        if self.cfg.policy == Policy::Group && lock(&self.state).disabled.is_none() {
            let todo = {
                let mut st = lock(&self.state);
                if !st.share.on() {
                    Vec::new()
                } else {
                    if st.graph.pending_changes() > 0 {
                        let per = (self.cfg.segment / self.cfg.item) as usize;
                        st.rebuild(per);
                    }
                    st.unstored_groups(4)
                }
            };
            let since = lock(&self.state).last_request;
            for g in todo {
                {
                    let st = lock(&self.state);
                    if st.last_request != since {
                        break; // requests again: not idle any more
                    }
                    if !st.grouping_affords(st.fill_cost(&g, self.cfg.item)) {
                        break; // grouping I/O at its cap
                    }
                    if !st.share.affords(st.source_runs(&g)) {
                        continue; // its SOURCE reads are more than groups earned
                    }
                }
                if let Err(e) = self.fill_group(None, &g) {
                    self.fault("writing the segment store", &e);
                    break;
                }
            }
        }
        if let Err(e) = self.save() {
            lock(&self.state).dirty = true;
            log::warn!("cannot save the segment table: {e}");
        }
    }
}
