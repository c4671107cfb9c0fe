//! The container mount's data path: one writer per file and writing process (opened
//! at its first write), publishing before reads, the cached reader rebuilt when the
//! index changed, flushes on close and `fsync`, and truncation (which closes every
//! writer of the file first).

use super::now_ns;
use super::state::{FileState, Handle, Shared, Writing};
use crate::fusekit::{lock, R};
use fuser::{FileHandle, Request};
use patio_container::{tools, Reader, Writer};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

impl Shared {
    /// Closes the writer of `w` (if open): flushes and releases it.
    pub(super) fn close_writer(&self, w: &mut Writing) -> R<bool> {
        w.dirty = false;
        w.unsynced = false;
        match w.writer.take() {
            Some(writer) => writer.close().map(|_| true).map_err(|e| self.fail(&e)),
            None => Ok(false),
        }
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
        if g.writer.is_none() {
            let dir = h.file.dir();
            let writer = Writer::open(&dir).map_err(|e| self.fail(&e))?;
            self.counters.writers.fetch_add(1, Ordering::Relaxed);
            lock(&self.written_files).insert(dir);
            g.writer = Some(writer);
        }
        let writer = g.writer.as_mut().expect("opened above");
        writer.write_at(offset, data).map_err(|e| self.fail(&e))?;
        g.dirty = true;
        g.unsynced = true;
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
        if f.unpublished.swap(0, Ordering::AcqRel) == 0 {
            return Ok(());
        }
        let mut inner = lock(&f.inner);
        let procs: Vec<_> = inner.procs.values().cloned().collect();
        let mut any = false;
        for w in procs {
            let mut g = lock(&w);
            if g.dirty {
                if let Some(writer) = g.writer.as_mut() {
                    writer.publish().map_err(|e| self.fail(&e))?;
                }
                g.dirty = false;
                any = true;
            }
        }
        if any {
            inner.generation += 1;
        }
        Ok(())
    }

    /// The file's reader, rebuilt when the index changed since it was built: from
    /// the previous reader when there is one of the same container (only the index
    /// bytes appended since, and new logs, are read), else from scratch.
    pub(super) fn reader_of(&self, f: &FileState) -> R<Arc<Reader>> {
        let mut inner = lock(&f.inner);
        let dir = f.dir();
        let r = match &inner.reader {
            Some((generation, r)) if *generation == inner.generation => return Ok(r.clone()),
            Some((_, r)) if r.dir() == dir => r.refresh(),
            _ => Reader::open(&dir),
        };
        let r = Arc::new(r.map_err(|e| self.fail(&e))?);
        self.counters.reader_builds.fetch_add(1, Ordering::Relaxed);
        // A reader that met a damaged (perhaps half-written) record is not kept.
        inner.reader = r.damage().is_empty().then(|| (inner.generation, r.clone()));
        Ok(r)
    }

    pub(super) fn read(&self, fh: FileHandle, offset: u64, size: u32) -> R<Vec<u8>> {
        let h = self.handle(fh)?;
        self.live()?;
        self.publish_pending(&h.file)?;
        let reader = self.reader_of(&h.file)?;
        let mut buf = vec![0u8; size as usize];
        let n = reader
            .read_at(&mut buf, offset)
            .map_err(|e| self.fail(&e))?;
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
        let procs: Vec<_> = match pid {
            Some(p) => inner.procs.get(&p).cloned().into_iter().collect(),
            None => inner.procs.values().cloned().collect(),
        };
        let mut any = false;
        for w in procs {
            let mut g = lock(&w);
            if !g.unsynced {
                continue;
            }
            if let Some(writer) = g.writer.as_mut() {
                writer.flush().map_err(|e| self.fail(&e))?;
            }
            g.unsynced = false;
            g.dirty = false;
            any = true;
        }
        if any {
            inner.generation += 1;
        }
        Ok(())
    }

    /// Truncates (or extends) file `f` to `size`: closes its writers, then records
    /// the truncation.
    pub(super) fn truncate(&self, f: &FileState, size: u64) -> R<()> {
        let mut inner = lock(&f.inner);
        let procs: Vec<_> = inner.procs.values().cloned().collect();
        let mut guards: Vec<_> = procs.iter().map(|w| lock(w)).collect();
        for g in guards.iter_mut() {
            self.close_writer(g)?;
        }
        let dir = f.dir();
        // Truncating to the size the file has (open(O_TRUNC) of an empty file) would
        // only add a record.
        if tools::stat(&dir).map_err(|e| self.fail(&e))?.size != size {
            tools::truncate(&dir, size).map_err(|e| self.fail(&e))?;
            self.counters.truncations.fetch_add(1, Ordering::Relaxed);
        }
        f.live_end.store(0, Ordering::Release);
        f.last_write_ns.store(now_ns(), Ordering::Release);
        inner.generation += 1;
        inner.reader = None;
        self.compactor.request(&dir, size == 0);
        Ok(())
    }
}
