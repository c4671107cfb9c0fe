//! The container mount's data path: one writer per file and writing process (opened
//! at its first write, on an ended writer's logs when one is small enough),
//! publishing before reads, the cached reader refreshed when the index changed,
//! publishing flushes on close, `fsync` (the only sync besides unmount and
//! compaction) and truncation (which publishes every writer of the file first, and
//! lets them write on).

use super::now_ns;
use super::state::{FileInner, FileState, Handle, Shared, Writing};
use crate::fusekit::{errno_of, lock, R};
use fuser::{FileHandle, Request};
use patio_container::{tools, Appended, Reader, Writer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Unpublished writes a read lays over the cached reader's data (read back from the
/// writer's data log) rather than publishing them and rebuilding the reader.
const OVERLAY_LIMIT: usize = 256;

/// Records a writer appends before a truncation closes it (see
/// `Shared::worth_closing`): what a reader of the file holds and copies stays small.
const ROLL_RECORDS: u64 = 256;

/// The mount's order of writers becoming dirty (see `Writing::dirty_since`).
static DIRTY_SEQ: AtomicU64 = AtomicU64::new(0);

impl Shared {
    /// Closes the writer of `w` (if open): flushes and releases it. The records its
    /// flush appended (`None`: no writer was open).
    pub(super) fn close_writer(&self, w: &mut Writing) -> R<Option<Vec<Appended>>> {
        w.dirty = false;
        w.unsynced = false;
        let Some(mut writer) = w.writer.take() else {
            return Ok(None);
        };
        writer.flush().map_err(|e| self.fail(&e))?;
        let appended = writer.take_appended();
        writer.close().map_err(|e| self.fail(&e))?;
        Ok(Some(appended))
    }

    /// The writing state of process `pid` for handle `h`, attaching the process to the
    /// handle the first time it writes through it.
    pub(super) fn writing_for(&self, h: &Handle, pid: u32) -> Arc<Mutex<Writing>> {
        if pid == h.opener {
            if let Some(w) = &h.opener_writing {
                return w.clone();
            }
        }
        let mut inner = lock(&h.file.inner);
        let mut pids = lock(&h.pids);
        let w = inner.procs.entry(pid).or_default().clone();
        if !pids.contains(&pid) {
            pids.push(pid);
            lock(&w).handles += 1;
        }
        w
    }

    pub(super) fn write(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
    ) -> R<usize> {
        let h = self.handle(fh)?;
        let pid = self.pid_of(req);
        let w = self.writing_for(&h, pid);
        let mut g = lock(&w);
        self.live()?;
        let (start, end) = (offset, offset + data.len() as u64);
        // Publish first (every dirty writer, in the order they became dirty) when this
        // writer would publish a record by itself, ahead of writers that wrote before
        // it and have not published yet, or when it has older unpublished writes and
        // this one overlaps what a writer dirty since after them has not published:
        // either way this write would otherwise be ordered before writes made before it.
        let full = g
            .writer
            .as_ref()
            .is_some_and(|w| w.publishes_at_next_write());
        if full || (g.dirty && lock(&h.file.pending).must_publish(g.dirty_since, start, end)) {
            drop(g);
            self.publish_pending(&h.file)?;
            g = lock(&w);
        }
        if g.writer.is_none() {
            let dir = h.file.dir();
            // An ended writer's logs when there are some small enough, else new ones.
            let mut writer = match Writer::reuse(&dir, self.reuse_limit) {
                Ok(Some(w)) => w,
                Ok(None) => Writer::open(&dir).map_err(|e| self.fail(&e))?,
                Err(e) => return Err(self.fail(&e)),
            };
            // Durability comes from fsync and unmount (`sync_file`, `finish`).
            writer.set_sync_on_flush(false);
            // Its records are laid over the file's cached reader (`reader_of`).
            writer.set_keep_appended();
            g.key_seen = writer.last_key();
            self.counters.writers.fetch_add(1, Ordering::Relaxed);
            lock(&self.written_files).insert(dir);
            g.writer = Some(writer);
        }
        let writer = g.writer.as_mut().expect("opened above");
        writer.write_at(offset, data).map_err(|e| self.fail(&e))?;
        if !g.dirty {
            g.dirty_since = DIRTY_SEQ.fetch_add(1, Ordering::Relaxed);
        }
        g.dirty = true;
        g.unsynced = true;
        lock(&h.file.pending).note(g.dirty_since, start, end);
        // Under the writer's lock: a truncation (which takes every writer's lock)
        // sees this write either entirely before or entirely after it.
        let f = &h.file;
        f.live_end
            .fetch_max(offset + data.len() as u64, Ordering::AcqRel);
        f.last_write_ns.store(now_ns(), Ordering::Release);
        f.unpublished.fetch_add(1, Ordering::AcqRel);
        drop(g);
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .written_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(data.len())
    }

    /// Publishes the unpublished writes of every writer of `f`.
    pub(super) fn publish_pending(&self, f: &FileState) -> R<()> {
        if f.unpublished.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        self.publish_locked(f, &mut lock(&f.inner))
    }

    /// [`Shared::publish_pending`] under the file's lock. Every path that publishes
    /// one writer (a close, a flush) publishes the others with it, in the order they
    /// became dirty: records are ordered by when they are published, so a writer that
    /// published alone would win over earlier unpublished writes of others, and lose
    /// to their later ones, whatever the order the writes were made in.
    pub(super) fn publish_locked(&self, f: &FileState, inner: &mut FileInner) -> R<()> {
        if f.unpublished.swap(0, Ordering::AcqRel) == 0 {
            return Ok(());
        }
        lock(&f.pending).clear();
        let mut procs: Vec<_> = inner.procs.values().cloned().collect();
        procs.sort_by_key(|w| lock(w).dirty_since);
        for w in procs {
            let mut g = lock(&w);
            if g.dirty {
                if let Some(writer) = g.writer.as_mut() {
                    writer.publish().map_err(|e| self.fail(&e))?;
                    inner.note_appended(writer.take_appended());
                    g.key_seen = writer.last_key();
                }
                g.dirty = false;
            }
        }
        Ok(())
    }

    /// The file's reader, rebuilt when the index changed since it was built: from
    /// the previous reader when there is one of the same container — the file's, or
    /// the one it had when it was last closed (`Shared::wake`) — with
    /// [`Reader::refresh`] (only the index bytes appended since are read, and applied
    /// over its merged index when they are all newer), else from scratch.
    pub(super) fn reader_of(&self, f: &FileState) -> R<Arc<Reader>> {
        let mut inner = lock(&f.inner);
        let dir = f.dir();
        let r = match &inner.reader {
            Some((generation, r)) if *generation == inner.generation => {
                if inner.appended.is_empty() && inner.truncated.is_empty() {
                    return Ok(r.clone());
                }
                // Only this mount's own records and truncations are new.
                match r.with_appended(&inner.appended, &inner.truncated) {
                    Some(laid) => Ok(laid),
                    None => r.refresh(),
                }
            }
            Some((_, r)) if r.dir() == dir => r.refresh(),
            _ => Reader::open(&dir),
        };
        inner.appended.clear();
        inner.truncated.clear();
        let r = Arc::new(r.map_err(|e| self.fail(&e))?);
        self.counters.reader_builds.fetch_add(1, Ordering::Relaxed);
        if r.merged_anew() {
            self.counters.reader_merges.fetch_add(1, Ordering::Relaxed);
        }
        // A reader that met a damaged (perhaps half-written) record is not kept.
        inner.reader = r.damage().is_empty().then(|| (inner.generation, r.clone()));
        Ok(r)
    }

    /// Before a read of `f`: when one writer alone has unpublished writes, few and all
    /// in its buffer, that writer (the read lays them over the reader's data);
    /// otherwise every writer publishes and `None`.
    fn overlay_or_publish(&self, f: &FileState) -> R<Option<Arc<Mutex<Writing>>>> {
        if f.unpublished.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        let solo = {
            let inner = lock(&f.inner);
            let mut dirty = inner.procs.values().filter(|w| lock(w).dirty);
            match (dirty.next(), dirty.next()) {
                (Some(w), None) if overlayable(&lock(w)) => Some(w.clone()),
                _ => None,
            }
        };
        if solo.is_none() {
            self.publish_pending(f)?;
        }
        Ok(solo)
    }

    pub(super) fn read(&self, fh: FileHandle, offset: u64, size: u32) -> R<Vec<u8>> {
        let h = self.handle(fh)?;
        self.live()?;
        let mut restated = false;
        let (buf, n) = loop {
            let solo = self.overlay_or_publish(&h.file)?;
            let reader = self.reader_of(&h.file)?;
            let mut buf = vec![0u8; size as usize];
            let mut n = reader
                .read_at(&mut buf, offset)
                .map_err(|e| self.fail(&e))?;
            if let Some(w) = solo {
                let g = lock(&w);
                if g.dirty && !overlayable(&g) {
                    // The writer wrote a record by itself since: publish and read again.
                    drop(g);
                    self.publish_pending(&h.file)?;
                    continue;
                }
                if let (true, Some(writer)) = (g.dirty, g.writer.as_ref()) {
                    n = n.max(
                        writer
                            .overlay(&mut buf, offset)
                            .map_err(|e| self.fail(&e))?,
                    );
                }
            }
            // Never short where the file is longer: a read that ends before the size
            // `getattr` reports (the container's meta files, which another mount of the
            // same backend updates) found the cached view stale; it is refreshed from
            // the backend and the read made again, once.
            if n < size as usize && !restated && self.size_now(&h.file)? > offset + n as u64 {
                restated = true;
                lock(&h.file.inner).changed();
                continue;
            }
            break (buf, n);
        };
        let mut buf = buf;
        buf.truncate(n);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .read_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(buf)
    }

    /// Flushes the writers of `f`: of process `pid` only, or all of them.
    pub(super) fn flush_writers(&self, f: &FileState, pid: Option<u32>) -> R<()> {
        let mut inner = lock(&f.inner);
        self.publish_locked(f, &mut inner)?;
        let procs: Vec<_> = match pid {
            Some(p) => inner.procs.get(&p).cloned().into_iter().collect(),
            None => inner.procs.values().cloned().collect(),
        };
        for w in procs {
            let mut g = lock(&w);
            if !g.unsynced {
                continue;
            }
            if let Some(writer) = g.writer.as_mut() {
                writer.flush().map_err(|e| self.fail(&e))?;
                inner.note_appended(writer.take_appended());
                g.key_seen = writer.last_key();
            }
            g.unsynced = false;
            g.dirty = false;
        }
        Ok(())
    }

    /// `fsync(2)` of file `f`: publishes every writer's writes, then syncs every log of
    /// the container (those of writers ended without a sync too) and its truncation log.
    ///
    /// It also ends this mount's cached view of the file (reader and `stat`): the next
    /// read and `getattr` see what every writer, through any mount of the backend,
    /// published before — so MPI-IO's sync-barrier-sync rule holds between nodes.
    pub(super) fn sync_file(&self, f: &FileState) -> R<()> {
        self.flush_writers(f, None)?;
        tools::sync(&f.dir()).map_err(|e| self.fail(&e))?;
        lock(&f.inner).changed();
        *lock(&f.quick) = None;
        Ok(())
    }

    /// Whether a truncation of a file to `size` closes `writer`: when its data log
    /// alone holds more than compaction lets the file keep (`dead_ratio` × `size` +
    /// `min_dead`), or it appended more than [`ROLL_RECORDS`] index records (every
    /// truncation publishes one), so that compaction, which takes only ended writers'
    /// logs, can reclaim what the truncation and the overwrites before it made dead
    /// and fold the records into one.
    fn worth_closing(&self, writer: &Writer, size: u64) -> bool {
        self.thresholds.is_some_and(|t| {
            writer.data_len() as f64 > size as f64 * t.dead_ratio + t.min_dead as f64
                || writer.records() > ROLL_RECORDS
        })
    }

    /// Truncates (or extends) file `f` to `size`: publishes its writers' writes (so
    /// they are ordered before the truncation), records the truncation and lets the
    /// writers write on — except those [`Shared::worth_closing`].
    pub(super) fn truncate(&self, f: &FileState, size: u64) -> R<()> {
        let mut inner = lock(&f.inner);
        let mut procs: Vec<_> = inner.procs.values().cloned().collect();
        procs.sort_by_key(|w| lock(w).dirty_since);
        let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
        let mut newest = 0u64;
        for g in guards.iter_mut() {
            let Some(writer) = g.writer.as_mut() else {
                continue;
            };
            // Closing publishes too, with no record after this one.
            writer.publish().map_err(|e| self.fail(&e))?;
            let (key, large) = (writer.last_key(), self.worth_closing(writer, size));
            inner.note_appended(writer.take_appended());
            newest = newest.max(key);
            g.key_seen = key;
            g.dirty = false;
            if large {
                if let Some(appended) = self.close_writer(g)? {
                    inner.note_appended(appended);
                }
            }
        }
        let dir = f.dir();
        // Truncating an empty file to zero (open(O_TRUNC) of an empty file) would only
        // add a record.
        if size != 0 || tools::stat(&dir).map_err(|e| self.fail(&e))?.size != 0 {
            let t = tools::truncate_with(&dir, size, false, newest).map_err(|e| self.fail(&e))?;
            inner.note_truncated(t);
            for g in guards.iter_mut() {
                if let Some(writer) = g.writer.as_mut() {
                    writer.note_truncation(t).map_err(|e| self.fail(&e))?;
                }
            }
            // Nothing is newer than the truncation: the size is its size.
            if let Some((_, q)) = lock(&f.quick).as_mut() {
                q.size = size;
                q.mtime_ns = q.mtime_ns.max(t.key);
            }
            self.counters.truncations.fetch_add(1, Ordering::Relaxed);
        }
        f.unpublished.store(0, Ordering::Release);
        lock(&f.pending).clear();
        f.live_end.store(0, Ordering::Release);
        f.last_write_ns.store(now_ns(), Ordering::Release);
        self.compactor.request(&dir, size == 0);
        Ok(())
    }
}

/// Zeros written at a time by `fallocate`.
const ZERO_CHUNK: u64 = 1 << 20;

impl Shared {
    /// `fallocate(2)` of handle `fh`. A container stores neither preallocated space
    /// nor holes of its own: plain allocation (mode 0) extends the size like a
    /// truncation up (the new bytes read as zeros), `FALLOC_FL_KEEP_SIZE` alone does
    /// nothing, and `FALLOC_FL_PUNCH_HOLE` / `FALLOC_FL_ZERO_RANGE` write zeros through
    /// the caller's writer (they cost data-log bytes, reclaimed by compaction when
    /// overwritten); with `FALLOC_FL_KEEP_SIZE` the zeros stop at the end of the
    /// file. Collapsing, inserting and unsharing ranges are not supported.
    pub(super) fn fallocate(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> R<()> {
        use libc::FALLOC_FL_ZERO_RANGE as ZERO;
        use libc::{FALLOC_FL_KEEP_SIZE as KEEP, FALLOC_FL_PUNCH_HOLE as PUNCH};
        if mode & !(KEEP | PUNCH | ZERO) != 0 {
            return Err(errno_of(libc::EOPNOTSUPP));
        }
        // As Linux: a hole is punched only with the size kept, never with zeroing too.
        if (mode & PUNCH != 0 && (mode & KEEP == 0 || mode & ZERO != 0)) || length == 0 {
            return Err(errno_of(libc::EINVAL));
        }
        let end = offset
            .checked_add(length)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| errno_of(libc::EFBIG))?;
        let h = self.handle(fh)?;
        self.live()?;
        let size = self.size_now(&h.file)?;
        let keep = mode & KEEP != 0;
        if mode & (PUNCH | ZERO) != 0 {
            let zero_end = if keep { end.min(size) } else { end };
            let zeros = vec![0u8; ZERO_CHUNK.min(zero_end.saturating_sub(offset)) as usize];
            let mut at = offset;
            while at < zero_end {
                let n = (zero_end - at).min(ZERO_CHUNK) as usize;
                self.write(req, fh, at, &zeros[..n])?;
                at += n as u64;
            }
        }
        if !keep && end > self.size_now(&h.file)? {
            self.truncate(&h.file, end)?;
        }
        Ok(())
    }
}

/// Whether a read may lay `w`'s unpublished writes over the cached reader's data.
fn overlayable(w: &Writing) -> bool {
    w.writer.as_ref().is_some_and(|writer| {
        writer.last_key() == w.key_seen && writer.unpublished_entries() <= OVERLAY_LIMIT
    })
}
