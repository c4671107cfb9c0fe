//! The container mount's handles: opening a container (`O_TRUNC` truncates through
//! the opener), releasing handles (closing the writers they kept open, removing an
//! unlinked container with its last handle) and closing everything left when the
//! mount ends.

use super::state::{FileState, Handle, Shared};
use super::ContainerSummary;
use crate::fusekit::{lock, R};
use crate::session::Ended;
use fuser::{FileHandle, Request};
use patio_container::tools;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

impl Shared {
    /// Opens the container at `rel` (already there) for `req` with open `flags`.
    pub(super) fn open_file(&self, req: &Request, ino: u64, rel: &Path, flags: i32) -> R<u64> {
        self.live()?;
        let pid = self.pid_of(req);
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let file = {
            let mut files = lock(&self.files);
            let file = Self::state(&mut files, &self.root, rel);
            let mut inner = lock(&file.inner);
            if inner.handles == 0 {
                self.wake(&file, &mut inner);
            }
            inner.handles += 1;
            drop(inner);
            file.ino.store(ino, Ordering::Release);
            file
        };
        let opener_writing = writable.then(|| {
            let w = lock(&file.inner).procs.entry(pid).or_default().clone();
            lock(&w).handles += 1;
            w
        });
        let handle = Handle {
            file: file.clone(),
            opener: pid,
            pids: Mutex::new(if writable { vec![pid] } else { vec![] }),
            opener_writing,
        };
        self.compactor.opened(&file.dir());
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.insert(fh, handle);
        if writable && flags & libc::O_TRUNC != 0 {
            if let Err(e) = self.truncate(&file, 0) {
                self.release(FileHandle(fh));
                return Err(e);
            }
        }
        Ok(fh)
    }

    pub(super) fn release(&self, fh: FileHandle) {
        let Some(h) = self.handles.remove(fh.0) else {
            return;
        };
        let f = &h.file;
        let last = {
            let mut inner = lock(&f.inner);
            inner.handles = inner.handles.saturating_sub(1);
            let mut closed = false;
            // Writers this release closes publish with (not before) those that wrote
            // before them; an error cannot reach the application (close has returned).
            if self.publish_locked(f, &mut inner).is_err() {
                inner.changed();
            }
            for pid in lock(&h.pids).iter() {
                let Some(w) = inner.procs.get(pid).cloned() else {
                    continue;
                };
                let mut g = lock(&w);
                g.handles = g.handles.saturating_sub(1);
                if g.handles == 0 {
                    inner.procs.remove(pid);
                    // An error here cannot reach the application (close has returned);
                    // it is counted and reported when the mount ends.
                    match self.close_writer(&mut g) {
                        Ok(Some(appended)) => {
                            inner.note_appended(appended);
                            closed = true;
                        }
                        Ok(None) => {}
                        Err(_) => {
                            inner.changed();
                            closed = true;
                        }
                    }
                }
            }
            if closed {
                self.compactor.request(&f.dir(), false);
            }
            inner.handles == 0
        };
        if !last {
            return;
        }
        // Nobody has the file open: its log sets can become one.
        self.compactor.request(&f.dir(), true);
        let mut files = lock(&self.files);
        let inner = lock(&f.inner);
        if inner.handles > 0 {
            return;
        }
        if inner.unlinked {
            lock(&self.orphans).retain(|o| !Arc::ptr_eq(o, f));
            if let Err(e) = tools::remove(&f.dir()) {
                self.fail(&e);
            }
        } else {
            let rel = f.loc().rel;
            if files.get(&rel).is_some_and(|kept| Arc::ptr_eq(kept, f)) {
                files.remove(&rel);
            }
            self.rest(f, &inner);
        }
    }

    /// Closes every writer still open and removes unlinked containers; the summary.
    pub(super) fn finish(&self, ended: Ended) -> ContainerSummary {
        self.finished.store(true, Ordering::Release);
        let mut states: Vec<Arc<FileState>> = lock(&self.files).values().cloned().collect();
        states.extend(lock(&self.orphans).iter().cloned());
        for f in &states {
            let mut inner = lock(&f.inner);
            // In the order they wrote (see `Shared::publish_locked`).
            if self.publish_locked(f, &mut inner).is_err() {
                inner.changed();
            }
            let procs: Vec<_> = inner.procs.values().cloned().collect();
            for w in procs {
                if let Ok(Some(_)) = self.close_writer(&mut lock(&w)) {
                    self.counters
                        .flushed_at_unmount
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            inner.changed();
            if inner.unlinked {
                if let Err(e) = tools::remove(&f.dir()) {
                    self.fail(&e);
                }
            }
        }
        self.compactor.stop();
        // Writers do not sync at close: the end of the mount makes everything durable.
        if let Err(e) = sync_backend(&self.root) {
            self.fail(&e);
        }
        self.summary(ended)
    }

    /// The counters so far (`Ended::Running` while the mount serves: live statistics).
    pub(super) fn summary(&self, ended: Ended) -> ContainerSummary {
        let c = &self.counters;
        let k = &self.compactor.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Acquire);
        ContainerSummary {
            ended,
            files: lock(&self.written_files).len() as u64,
            writers: get(&c.writers),
            flushed_at_unmount: get(&c.flushed_at_unmount),
            writes: get(&c.writes),
            written_bytes: get(&c.written_bytes),
            reads: get(&c.reads),
            read_bytes: get(&c.read_bytes),
            reader_builds: get(&c.reader_builds),
            reader_merges: get(&c.reader_merges),
            truncations: get(&c.truncations),
            compactions: get(&k.runs),
            compacted_logs: get(&k.logs),
            reclaimed_bytes: get(&k.reclaimed),
            compaction_errors: get(&k.errors),
            first_compaction_error: lock(&k.first_error).clone(),
            failures: get(&c.failures),
            first_failure: lock(&self.first_failure).clone(),
        }
    }
}

/// `syncfs(2)` of the file system holding the backend root.
fn sync_backend(root: &Path) -> Result<(), patio_container::ContainerError> {
    use std::os::fd::AsRawFd;
    let io = |error| patio_container::ContainerError::Io {
        path: root.display().to_string(),
        error,
    };
    let dir = std::fs::File::open(root).map_err(io)?;
    // SAFETY: syncfs only reads the descriptor, which `dir` keeps open.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(io(std::io::Error::last_os_error()));
    }
    Ok(())
}
