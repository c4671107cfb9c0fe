//! The segment store of the segment-grouping cache: one preallocated file of
//! fixed-size slots on local storage (`segments.dat` in the cache directory), read
//! and written in 4 KiB-aligned pieces of a slot with `O_DIRECT` where the file system
//! allows it, and the allocator that hands out its slots (free slots first, then the
//! least recently used one).

use patio_prefetch::backend::read_full;
use patio_prefetch::{AlignedBuf, DIRECT_ALIGN};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Slots of the store: which are free, and the use order of the others.
#[derive(Clone, Debug)]
pub struct SlotAllocator {
    free: BTreeSet<u32>,
    /// used slot → its last-use stamp; stamp → slot (the LRU order).
    used: HashMap<u32, u64>,
    order: BTreeMap<u64, u32>,
    clock: u64,
}

impl SlotAllocator {
    /// `slots` free slots, handed out lowest first.
    pub fn new(slots: u32) -> Self {
        SlotAllocator {
            free: (0..slots).collect(),
            used: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    pub fn slots(&self) -> u32 {
        (self.free.len() + self.used.len()) as u32
    }

    pub fn used(&self) -> usize {
        self.used.len()
    }

    /// A slot for new contents, most recently used from now on: a free one, else the
    /// least recently used one, returned as evicted too (its old contents are gone).
    pub fn alloc(&mut self) -> (u32, Option<u32>) {
        if let Some(slot) = self.free.pop_first() {
            self.touch_new(slot);
            return (slot, None);
        }
        let (&stamp, &slot) = self.order.iter().next().expect("at least one slot");
        self.order.remove(&stamp);
        self.used.remove(&slot);
        self.touch_new(slot);
        (slot, Some(slot))
    }

    /// Whether a slot is free.
    pub fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// The used slots, least recently used first.
    pub fn lru_order(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.values().copied()
    }

    /// Marks `slot` (a used one, or a free one taken over from a saved table) as just
    /// used.
    pub fn touch(&mut self, slot: u32) {
        if self.free.remove(&slot) {
        } else if let Some(old) = self.used.remove(&slot) {
            self.order.remove(&old);
        } else {
            return;
        }
        self.touch_new(slot);
    }

    fn touch_new(&mut self, slot: u32) {
        self.clock += 1;
        self.used.insert(slot, self.clock);
        self.order.insert(self.clock, slot);
    }

    /// `slot` no longer holds anything.
    pub fn release(&mut self, slot: u32) {
        if let Some(stamp) = self.used.remove(&slot) {
            self.order.remove(&stamp);
            self.free.insert(slot);
        }
    }
}

/// The slot file.
pub struct SegmentFile {
    file: File,
    slot_size: u64,
    slots: u32,
    direct: bool,
}

fn round_up(n: usize) -> usize {
    n.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN
}

impl SegmentFile {
    /// Opens (creating it if needed) `path` as `slots` slots of `slot_size` bytes (a
    /// multiple of 4 KiB), preallocated so that a full disk shows now and not in the
    /// middle of a read.
    pub fn open(path: &Path, slot_size: u64, slots: u32) -> io::Result<Self> {
        assert!(slot_size > 0 && slot_size.is_multiple_of(DIRECT_ALIGN as u64));
        let plain = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = slot_size * slots as u64;
        if plain.metadata()?.len() != len {
            plain.set_len(0)?;
            // SAFETY: plain syscall on a descriptor we own.
            let r = unsafe { libc::fallocate(plain.as_raw_fd(), 0, 0, len as libc::off_t) };
            if r != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                    let _ = plain.set_len(0);
                    return Err(e);
                }
                plain.set_len(len)?;
            }
        }
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()
            .filter(|f| {
                let mut probe = AlignedBuf::new(DIRECT_ALIGN);
                f.read_at(probe.as_mut_slice(), 0).is_ok()
            });
        Ok(match direct {
            Some(file) => SegmentFile {
                file,
                slot_size,
                slots,
                direct: true,
            },
            None => SegmentFile {
                file: plain,
                slot_size,
                slots,
                direct: false,
            },
        })
    }

    pub fn direct(&self) -> bool {
        self.direct
    }

    pub fn slot_size(&self) -> u64 {
        self.slot_size
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Writes `data` (at most a slot) at the start of `slot`. Not durable until
    /// [`SegmentFile::sync`]; readers check every item's checksum anyway.
    pub fn write(&self, slot: u32, data: &[u8]) -> io::Result<()> {
        self.write_at(slot, 0, data)
    }

    /// Writes `data` at `offset` (a multiple of 4 KiB) inside `slot`, padded with
    /// zeros to 4 KiB; it must end inside the slot.
    pub fn write_at(&self, slot: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        let len = round_up(data.len());
        assert!(slot < self.slots && offset.is_multiple_of(DIRECT_ALIGN as u64));
        assert!(offset + len as u64 <= self.slot_size);
        let at = slot as u64 * self.slot_size + offset;
        let mut buf = AlignedBuf::new(len);
        buf.as_mut_slice()[..data.len()].copy_from_slice(data);
        self.file.write_all_at(&buf.as_slice()[..len], at)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The first `len` bytes of `slot` (at most a slot).
    pub fn read(&self, slot: u32, len: usize) -> io::Result<Vec<u8>> {
        self.read_at(slot, 0, len)
    }

    /// `len` bytes at `offset` (a multiple of 4 KiB) inside `slot`.
    pub fn read_at(&self, slot: u32, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        assert!(slot < self.slots && offset.is_multiple_of(DIRECT_ALIGN as u64));
        assert!(offset + len as u64 <= self.slot_size);
        let at = slot as u64 * self.slot_size + offset;
        let padded = round_up(len).min((self.slot_size - offset) as usize);
        let mut buf = AlignedBuf::new(round_up(len));
        let n = read_full(&self.file, &mut buf.as_mut_slice()[..padded], at)?;
        if n < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment store file shorter than its slots",
            ));
        }
        Ok(buf.as_slice()[..len].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc,
        Touch(u32),
        Release(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Alloc),
            2 => (0u32..8).prop_map(Op::Touch),
            1 => (0u32..8).prop_map(Op::Release),
        ]
    }

    proptest! {
        /// Against a reference: a list of used slots, least recently used first, and
        /// the lowest free slot handed out first.
        #[test]
        fn allocator_follows_the_reference(ops in proptest::collection::vec(op(), 0..200)) {
            let n = 6u32;
            let mut a = SlotAllocator::new(n);
            let mut lru: Vec<u32> = Vec::new();
            for o in ops {
                match o {
                    Op::Alloc => {
                        let got = a.alloc();
                        let want = match (0..n).find(|s| !lru.contains(s)) {
                            Some(s) => (s, None),
                            None => {
                                let s = lru.remove(0);
                                (s, Some(s))
                            }
                        };
                        lru.push(want.0);
                        prop_assert_eq!(got, want);
                    }
                    Op::Touch(s) => {
                        a.touch(s % n);
                        lru.retain(|x| *x != s % n);
                        lru.push(s % n);
                    }
                    Op::Release(s) => {
                        a.release(s % n);
                        lru.retain(|x| *x != s % n);
                    }
                }
                prop_assert_eq!(a.used(), lru.len());
                prop_assert_eq!(a.slots(), n);
            }
        }
    }

    #[test]
    fn slots_hold_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segments.dat");
        let f = SegmentFile::open(&path, 16 << 10, 4).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 64 << 10);
        let a: Vec<u8> = (0..10_000u32).map(|i| (i * 31) as u8).collect();
        f.write(2, &a).unwrap();
        f.write(3, &[7u8; 16 << 10]).unwrap();
        assert_eq!(f.read(2, 10_000).unwrap(), a);
        assert_eq!(f.read(2, 100).unwrap(), a[..100]);
        drop(f);
        let g = SegmentFile::open(&path, 16 << 10, 4).unwrap();
        assert_eq!(g.read(2, 10_000).unwrap(), a, "kept across reopening");
    }
}
