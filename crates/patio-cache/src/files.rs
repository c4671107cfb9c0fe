//! The source files the cache serves: registering an open file, checking it against
//! what was recorded before each read, and the changes made to it through the front
//! end (written ranges, new sizes) that drop the items they overlap.

use crate::core::{lock, stat_of, Cache, FileState};
use patio_prefetch::DataFile;
use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Files whose source descriptors stay open after their last handle closed.
pub const KEEP_CLOSED: usize = 256;

/// A change to a file made through the front end, as it reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `len` bytes written at `offset`.
    Written { offset: u64, len: u64 },
    /// The file's size set to `size` (a truncation, an extension, `fallocate`).
    Resized { size: u64 },
}

/// An open handle of a source file read through the cache: checked against what was
/// recorded before every read, closed when dropped.
pub struct OpenFile {
    cache: Arc<Cache>,
    idx: u32,
}

impl OpenFile {
    /// Reads up to `buf.len()` bytes at `offset` for caller `pid` (whose successor
    /// stream they continue); `file` is the handle's source file, checked first.
    pub fn read_at(&self, file: &File, offset: u64, buf: &mut [u8], pid: u32) -> io::Result<usize> {
        let (size, epoch) = self.cache.check(self.idx, &file.metadata()?);
        self.cache.read(self.idx, size, epoch, offset, buf, pid)
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        self.cache.close_file(self.idx);
    }
}

impl Cache {
    /// Opens a handle of the source file at `rel` (relative to SOURCE; `meta` its
    /// metadata now, `file` a descriptor of it kept for checks, `data` its reader
    /// behind the storage model).
    pub fn open(
        self: &Arc<Self>,
        rel: &str,
        meta: &fs::Metadata,
        file: File,
        data: Arc<DataFile>,
    ) -> OpenFile {
        OpenFile {
            cache: self.clone(),
            idx: self.open_file(rel, meta, file, data),
        }
    }

    /// Registers an open handle of the source file at `rel`; returns its index.
    fn open_file(&self, rel: &str, meta: &fs::Metadata, file: File, data: Arc<DataFile>) -> u32 {
        let mut st = lock(&self.state);
        let now = stat_of(rel, meta);
        let idx = match st.by_id.get(&(now.dev, now.ino)) {
            Some(&i) => i,
            None => {
                let i = st.files.len() as u32;
                st.by_id.insert((now.dev, now.ino), i);
                st.files.push(FileState {
                    rec: now.clone(),
                    epoch: 0,
                    pay: Default::default(),
                    data: None,
                    stat_file: None,
                    open: 0,
                });
                i
            }
        };
        if st.revalidate(idx, now) {
            st.stats.stale_files += 1;
        }
        let f = &mut st.files[idx as usize];
        f.open += 1;
        if f.data.is_none() {
            f.data = Some(data);
            f.stat_file = Some(file);
        }
        idx
    }

    /// The last handle of a file closed. Its source descriptors stay open (for
    /// grouping in idle periods) while at most [`KEEP_CLOSED`] files are kept so.
    fn close_file(&self, idx: u32) {
        let mut st = lock(&self.state);
        st.files[idx as usize].open -= 1;
        if st.files[idx as usize].open > 0 {
            return;
        }
        let kept = st
            .files
            .iter()
            .filter(|f| f.open == 0 && f.data.is_some())
            .count();
        if kept > KEEP_CLOSED {
            let f = &mut st.files[idx as usize];
            f.data = None;
            f.stat_file = None;
        }
    }

    /// Compares the file with what was recorded (dropping its items if it changed)
    /// and returns its current size and the epoch that size belongs to: a read
    /// fills under that epoch, so that a change after this check drops what it
    /// read (an item cut at the old size must not outlive an extension).
    pub fn check(&self, idx: u32, meta: &fs::Metadata) -> (u64, u64) {
        let mut st = lock(&self.state);
        let now = stat_of(&st.files[idx as usize].rec.path, meta);
        let size = now.size;
        if st.revalidate(idx, now) {
            st.stats.stale_files += 1;
        }
        if let Some(d) = &st.files[idx as usize].data {
            d.set_size(size);
        }
        (size, st.files[idx as usize].epoch)
    }

    /// A change through the front end is about to happen: a change made outside it
    /// before it must be seen now, since the change's own report records the file's
    /// version afterwards.
    pub fn before_change(&self, idx: u32, source: &Path) {
        let mut st = lock(&self.state);
        let f = &st.files[idx as usize];
        let meta = match &f.stat_file {
            Some(file) => file.metadata(),
            None => fs::symlink_metadata(source.join(&f.rec.path)),
        };
        if let Ok(m) = meta {
            let now = stat_of(&f.rec.path.clone(), &m);
            if st.revalidate(idx, now) {
                st.stats.stale_files += 1;
            }
        }
    }

    /// A change through the front end: drops the items it overlaps (and the last one if
    /// the file grows), then records the file's new version.
    pub fn changed(&self, idx: u32, change: Change, source: &Path) {
        let b = self.cfg.item;
        let mut st = lock(&self.state);
        let old = st.files[idx as usize].rec.size;
        match change {
            Change::Written { offset, len } => {
                let end = offset.saturating_add(len.max(1));
                st.drop_range(idx, offset / b, (end - 1) / b);
                if end > old {
                    st.drop_range(idx, old / b, old / b);
                }
            }
            Change::Resized { size } => st.drop_range(idx, size.min(old) / b, u64::MAX),
        }
        let f = &st.files[idx as usize];
        let meta = match &f.stat_file {
            Some(file) => file.metadata(),
            None => fs::symlink_metadata(source.join(&f.rec.path)),
        };
        if let Ok(m) = meta {
            let path = f.rec.path.clone();
            let rec = stat_of(&path, &m);
            if let Some(d) = &st.files[idx as usize].data {
                d.set_size(rec.size);
            }
            st.files[idx as usize].rec = rec;
        }
    }

    /// The index of the file with this device and inode number, if the cache knows it.
    pub fn file_index(&self, dev: u64, ino: u64) -> Option<u32> {
        lock(&self.state).by_id.get(&(dev, ino)).copied()
    }

    /// The reader of file `idx`'s SOURCE while it is open (or kept open).
    pub fn source_of(&self, idx: u32) -> Option<Arc<DataFile>> {
        lock(&self.state).files[idx as usize].data.clone()
    }
}
