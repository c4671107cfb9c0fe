//! The harness the container's model tests share: writers of one container driven
//! in call order against a byte-array model of the file, checked through fresh and
//! refreshed readers and `stat`.
//!
//! Ordering rule (docs/ARCHITECTURE.md): a write is ordered after another writer's
//! write when that writer flushed in between. The harness flushes the other writers
//! before each write (and every writer before a truncation), so the model is simply
//! "apply in call order".
#![allow(dead_code)]

use patio_container::tools::truncate_with;
use patio_container::{stat, Reader, Writer};
use std::path::Path;

pub fn bytes(seed: u8, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((offset + i) as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

pub struct Harness<'a> {
    pub dir: &'a Path,
    pub writers: Vec<Option<Writer>>,
    pub dirty: Vec<bool>,
    pub buffer: usize,
    pub model: Vec<u8>,
    /// A reader kept across checks and refreshed (incremental index load) at each.
    pub last: Option<Reader>,
}

impl Harness<'_> {
    pub fn writer(&mut self, w: usize) -> &mut Writer {
        if self.writers[w].is_none() {
            let mut wr = Writer::open(self.dir).unwrap();
            wr.set_index_buffer(self.buffer);
            self.writers[w] = Some(wr);
        }
        self.writers[w].as_mut().unwrap()
    }

    pub fn flush_others(&mut self, w: usize) {
        for o in 0..self.writers.len() {
            if o != w && self.dirty[o] {
                self.writers[o].as_mut().unwrap().flush().unwrap();
                self.dirty[o] = false;
            }
        }
    }

    pub fn write(&mut self, w: usize, offset: u64, data: &[u8]) {
        self.flush_others(w);
        self.writer(w).write_at(offset, data).unwrap();
        self.dirty[w] = true;
        let end = offset as usize + data.len();
        if self.model.len() < end {
            self.model.resize(end, 0);
        }
        self.model[offset as usize..end].copy_from_slice(data);
    }

    pub fn flush_all(&mut self) {
        self.flush_others(usize::MAX);
    }

    pub fn check(&mut self, offset: u64, len: usize) {
        self.flush_all();
        let r = Reader::open(self.dir).unwrap();
        assert!(r.damage().is_empty(), "{:?}", r.damage());
        assert_eq!(r.size(), self.model.len() as u64, "size");
        assert_eq!(
            stat(self.dir).unwrap().size,
            self.model.len() as u64,
            "stat size"
        );
        let mut buf = vec![0xAAu8; len];
        let n = r.read_at(&mut buf, offset).unwrap();
        let start = (offset as usize).min(self.model.len());
        let end = (offset as usize + len).min(self.model.len());
        assert_eq!(n, end - start, "read length at {offset}+{len}");
        assert!(
            buf[..n] == self.model[start..end],
            "bytes at {offset}+{len}"
        );
        let mut whole = vec![0u8; self.model.len()];
        assert_eq!(r.read_at(&mut whole, 0).unwrap(), self.model.len());
        assert!(whole == self.model, "whole file");
        let kept = match self.last.take() {
            Some(old) => old.refresh().unwrap(),
            None => r,
        };
        assert!(kept.damage().is_empty(), "{:?}", kept.damage());
        assert_eq!(kept.size(), self.model.len() as u64, "refreshed size");
        let mut again = vec![0u8; self.model.len()];
        assert_eq!(kept.read_at(&mut again, 0).unwrap(), self.model.len());
        assert!(again == self.model, "whole file through a refreshed reader");
        self.last = Some(kept);
    }
}

impl<'a> Harness<'a> {
    /// A harness of `writers` writers (none open yet) of the container at `dir`,
    /// each buffering `buffer` index entries.
    pub fn new(dir: &'a Path, writers: usize, buffer: usize) -> Self {
        Harness {
            dir,
            writers: (0..writers).map(|_| None).collect(),
            dirty: vec![false; writers],
            buffer,
            model: Vec::new(),
            last: None,
        }
    }

    /// Flushes writer `w` (after the others), if open.
    pub fn flush(&mut self, w: usize) {
        if self.writers[w].is_some() {
            self.flush_others(w);
            self.writers[w].as_mut().unwrap().flush().unwrap();
            self.dirty[w] = false;
        }
    }

    /// Closes writer `w` (after flushing the others), if open: its logs are an ended
    /// writer's, which compaction may take.
    pub fn close(&mut self, w: usize) {
        if let Some(wr) = self.writers[w].take() {
            self.flush_others(w);
            wr.close().unwrap();
            self.dirty[w] = false;
        }
    }

    /// Truncates the file to `size` after every writer's writes.
    /// As the FUSE mount does it: keyed after every writer's last record, and noted
    /// by every open writer, which writes on.
    pub fn truncate(&mut self, size: u64) {
        self.flush_all();
        let newest = self.writers.iter().flatten().map(|w| w.last_key()).max();
        let t = truncate_with(self.dir, size, false, newest.unwrap_or(0)).unwrap();
        for w in self.writers.iter_mut().flatten() {
            w.note_truncation(t).unwrap();
        }
        self.model.resize(size as usize, 0);
    }

    /// Writer `w` closed (if open) and opened again on an ended writer's logs of at
    /// most `limit` data bytes when one can be taken over (`Writer::reuse`).
    pub fn reuse(&mut self, w: usize, limit: u64) {
        self.close(w);
        if let Some(mut wr) = Writer::reuse(self.dir, limit).unwrap() {
            wr.set_index_buffer(self.buffer);
            self.writers[w] = Some(wr);
        }
    }
}
