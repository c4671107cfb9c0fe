//! The prefetch cache: prefetched byte ranges of one or more files under ONE global
//! byte budget that is never exceeded.
//!
//! * **Entries** are disjoint ranges of a file, each either *filling* (reserved when
//!   the prefetch is issued; the bytes count against the budget from then on) or
//!   *ready*. Only ready entries can be evicted; when in-flight reservations fill the
//!   budget, further prefetches are refused, never squeezed in.
//! * **Use.** A read takes what it needs: ready bytes at once, filling entries by
//!   waiting on their [`Slot`] (a late hit), the rest is missing and read by the
//!   caller. Bytes a read has taken are *used*; an entry whose bytes have all been
//!   used is dropped at once (its data went to the application; the cache is for
//!   what has not been read yet).
//! * **Eviction** is least recently used among ready entries. Evicting bytes that
//!   were prefetched and never used counts as *waste*, and so do unused bytes
//!   expired by the engine or still cached when the run ends ([`Cache::drain`]).
//!   After a drain, `prefetched = used + wasted`.
//! * A filling entry whose prefetch has not started yet can be taken over by the
//!   reader that needs it ("stolen"): it is removed and the reader reads the bytes
//!   itself, as a miss; the prefetch is never counted as prefetched.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Identifies a file inside one cache.
pub type FileId = u64;

/// State of one prefetch from issue to completion.
#[derive(Debug)]
enum SlotState {
    Queued,
    Running,
    Done(Result<Arc<[u8]>, Arc<io::Error>>),
    /// Taken over by a reader before a worker started it.
    Stolen,
}

/// The handle of an in-flight prefetch: readers wait on it, the worker completes it.
#[derive(Debug)]
pub struct Slot {
    state: Mutex<SlotState>,
    cv: Condvar,
}

impl Slot {
    fn new() -> Arc<Self> {
        Arc::new(Slot {
            state: Mutex::new(SlotState::Queued),
            cv: Condvar::new(),
        })
    }

    /// Claims a queued prefetch for a worker; `false` when a reader stole it.
    pub fn start(&self) -> bool {
        let mut s = self.state.lock().expect("slot poisoned");
        if matches!(*s, SlotState::Queued) {
            *s = SlotState::Running;
            true
        } else {
            false
        }
    }

    /// Claims a queued prefetch for a reader.
    fn steal(&self) -> bool {
        let mut s = self.state.lock().expect("slot poisoned");
        if matches!(*s, SlotState::Queued) {
            *s = SlotState::Stolen;
            true
        } else {
            false
        }
    }

    /// Publishes the prefetched bytes (or the error) and wakes the waiting readers.
    pub fn finish(&self, result: Result<Arc<[u8]>, Arc<io::Error>>) {
        *self.state.lock().expect("slot poisoned") = SlotState::Done(result);
        self.cv.notify_all();
    }

    /// The bytes, if the prefetch has completed successfully.
    fn ready(&self) -> Option<Arc<[u8]>> {
        match &*self.state.lock().expect("slot poisoned") {
            SlotState::Done(Ok(d)) => Some(d.clone()),
            _ => None,
        }
    }

    /// Waits for the prefetch to complete.
    pub fn wait(&self) -> Result<Arc<[u8]>, Arc<io::Error>> {
        let mut s = self.state.lock().expect("slot poisoned");
        loop {
            match &*s {
                SlotState::Done(r) => return r.clone(),
                SlotState::Stolen => {
                    return Err(Arc::new(io::Error::other("prefetch was cancelled")))
                }
                _ => s = self.cv.wait(s).expect("slot poisoned"),
            }
        }
    }
}

/// Byte counters of whoever issued an entry (a stream): its waste, so that it can
/// prefetch less, and what it prefetched and used, for per-stream statistics.
#[derive(Debug, Default)]
pub struct Owner {
    pub wasted_events: AtomicU64,
    pub wasted_bytes: AtomicU64,
    /// Bytes of the owner's completed prefetches.
    pub prefetched_bytes: AtomicU64,
    /// Bytes of the owner's completed prefetches that reads used.
    pub used_bytes: AtomicU64,
    /// Set when the owner is gone: its prefetches that complete afterwards are
    /// dropped at once as waste instead of waiting in the cache for eviction.
    pub closed: AtomicBool,
}

/// One piece of a read, in file order.
#[derive(Debug)]
pub enum Piece {
    /// `len` bytes at `data[at..]`, in the cache now.
    Ready {
        data: Arc<[u8]>,
        at: usize,
        len: usize,
    },
    /// `len` bytes at `at` of an in-flight prefetch: wait on the slot.
    Filling {
        slot: Arc<Slot>,
        at: usize,
        len: usize,
    },
    /// `len` bytes not in the cache: the caller reads them. `stolen` when they were
    /// a queued prefetch the caller takes over (the prefetch was issued too late).
    Missing { offset: u64, len: u64, stolen: bool },
}

impl Piece {
    pub fn len(&self) -> u64 {
        match self {
            Piece::Ready { len, .. } | Piece::Filling { len, .. } => *len as u64,
            Piece::Missing { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A prefetch reserved in the cache, to be read by a worker.
#[derive(Debug)]
pub struct Reserved {
    pub file: FileId,
    pub offset: u64,
    pub len: u64,
    pub id: u64,
    pub slot: Arc<Slot>,
}

#[derive(Debug)]
enum Data {
    Filling(Arc<Slot>),
    Ready(Arc<[u8]>),
}

#[derive(Debug)]
struct Entry {
    id: u64,
    len: u64,
    data: Data,
    /// Used sub-ranges, relative to the entry start, sorted and disjoint.
    used: Vec<(u64, u64)>,
    /// LRU tick while ready.
    tick: u64,
    owner: Option<Arc<Owner>>,
}

impl Entry {
    fn used_bytes(&self) -> u64 {
        self.used.iter().map(|(a, b)| b - a).sum()
    }
}

/// Byte counters of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub budget: u64,
    /// Bytes reserved or resident now.
    pub resident: u64,
    /// Largest `resident` ever.
    pub peak: u64,
    /// Bytes of completed prefetches.
    pub prefetched: u64,
    /// Bytes of completed prefetches that reads used (each byte once).
    pub used: u64,
    /// Prefetched bytes evicted, expired or drained without being used.
    pub wasted: u64,
    /// Ready entries evicted to make room.
    pub evictions: u64,
    /// Prefetches taken over by readers before they started.
    pub stolen: u64,
    /// Prefetches refused because in-flight reservations filled the budget.
    pub refused: u64,
}

/// The cache; the engine keeps it behind one mutex.
#[derive(Debug)]
pub struct Cache {
    entries: BTreeMap<(FileId, u64), Entry>,
    /// Ready entries by last use.
    lru: BTreeMap<u64, (FileId, u64)>,
    tick: u64,
    next_id: u64,
    stats: CacheStats,
}

/// Adds `[lo, hi)` to a sorted disjoint range list; returns the bytes newly covered.
fn add_range(ranges: &mut Vec<(u64, u64)>, lo: u64, hi: u64) -> u64 {
    let before: u64 = ranges.iter().map(|(a, b)| b - a).sum();
    let (mut lo, mut hi) = (lo, hi);
    ranges.retain(|&(a, b)| {
        if b < lo || a > hi {
            true
        } else {
            lo = lo.min(a);
            hi = hi.max(b);
            false
        }
    });
    let at = ranges.partition_point(|&(a, _)| a < lo);
    ranges.insert(at, (lo, hi));
    ranges.iter().map(|(a, b)| b - a).sum::<u64>() - before
}

impl Cache {
    pub fn new(budget: u64) -> Self {
        Cache {
            entries: BTreeMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            next_id: 1,
            stats: CacheStats {
                budget,
                ..CacheStats::default()
            },
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    fn check_budget(&self) {
        debug_assert!(
            self.stats.resident <= self.stats.budget,
            "cache holds {} bytes over its budget of {}",
            self.stats.resident,
            self.stats.budget
        );
    }

    fn touch(&mut self, key: (FileId, u64)) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.entries.get_mut(&key) {
            if matches!(e.data, Data::Ready(_)) {
                self.lru.remove(&e.tick);
                e.tick = tick;
                self.lru.insert(tick, key);
            }
        }
    }

    /// Removes an entry; its unused bytes count as waste when `waste` is set (and the
    /// entry had completed).
    fn remove(&mut self, key: (FileId, u64), waste: bool) -> u64 {
        let Some(e) = self.entries.remove(&key) else {
            return 0;
        };
        self.stats.resident -= e.len;
        let mut wasted = 0;
        if let Data::Ready(_) = e.data {
            self.lru.remove(&e.tick);
            if waste {
                wasted = e.len - e.used_bytes();
                self.stats.wasted += wasted;
                if let (Some(owner), true) = (&e.owner, wasted > 0) {
                    owner.wasted_events.fetch_add(1, Ordering::Relaxed);
                    owner.wasted_bytes.fetch_add(wasted, Ordering::Relaxed);
                }
            }
        }
        wasted
    }

    /// Keys of the entries of `file` overlapping `[lo, hi)`, in order.
    fn overlapping(&self, file: FileId, lo: u64, hi: u64) -> Vec<(FileId, u64)> {
        let mut keys = Vec::new();
        if let Some((&k, e)) = self.entries.range(..(file, lo)).next_back() {
            if k.0 == file && k.1 + e.len > lo {
                keys.push(k);
            }
        }
        keys.extend(self.entries.range((file, lo)..(file, hi)).map(|(&k, _)| k));
        keys
    }

    /// Splits the read `[offset, offset + len)` of `file` into pieces and marks the
    /// cached ones used. Filling entries that no worker has started are stolen: their
    /// bytes come back as missing.
    pub fn take(&mut self, file: FileId, offset: u64, len: u64) -> Vec<Piece> {
        let end = offset + len;
        let mut pieces = Vec::new();
        let mut at = offset;
        for key in self.overlapping(file, offset, end) {
            let e = self.entries.get(&key).expect("listed");
            let (lo, hi) = (key.1.max(offset), (key.1 + e.len).min(end));
            if lo > at {
                pieces.push(Piece::Missing {
                    offset: at,
                    len: lo - at,
                    stolen: false,
                });
            }
            at = hi;
            let rel = ((lo - key.1) as usize, (hi - lo) as usize);
            let data = match &e.data {
                Data::Ready(d) => Some(d.clone()),
                Data::Filling(slot) => slot.ready(),
            };
            let piece = match (data, &e.data) {
                (Some(data), _) => Piece::Ready {
                    data,
                    at: rel.0,
                    len: rel.1,
                },
                (None, Data::Filling(slot)) if slot.steal() => {
                    self.stats.stolen += 1;
                    self.remove(key, false);
                    pieces.push(Piece::Missing {
                        offset: lo,
                        len: hi - lo,
                        stolen: true,
                    });
                    continue;
                }
                (None, Data::Filling(slot)) => Piece::Filling {
                    slot: slot.clone(),
                    at: rel.0,
                    len: rel.1,
                },
                (None, Data::Ready(_)) => unreachable!("ready entries have data"),
            };
            pieces.push(piece);
            let e = self.entries.get_mut(&key).expect("listed");
            let new = add_range(&mut e.used, lo - key.1, hi - key.1);
            let (complete, ready) = (e.used_bytes() == e.len, matches!(e.data, Data::Ready(_)));
            if ready {
                self.stats.used += new;
                if let Some(owner) = &e.owner {
                    owner.used_bytes.fetch_add(new, Ordering::Relaxed);
                }
                if complete {
                    self.remove(key, false);
                } else {
                    self.touch(key);
                }
            }
        }
        if at < end {
            pieces.push(Piece::Missing {
                offset: at,
                len: end - at,
                stolen: false,
            });
        }
        pieces
    }

    /// The parts of `[offset, offset + len)` of `file` that no entry covers.
    pub fn gaps(&self, file: FileId, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let end = offset + len;
        let mut out = Vec::new();
        let mut at = offset;
        for key in self.overlapping(file, offset, end) {
            let e = &self.entries[&key];
            if key.1 > at {
                out.push((at, key.1 - at));
            }
            at = at.max(key.1 + e.len);
        }
        if at < end {
            out.push((at, end - at));
        }
        out
    }

    /// Reserves `[offset, offset + len)` of `file` (which no entry may cover) for a
    /// prefetch, evicting least recently used ready entries to make room. `None` when
    /// the budget is held by in-flight prefetches.
    pub fn reserve(
        &mut self,
        file: FileId,
        offset: u64,
        len: u64,
        owner: Option<Arc<Owner>>,
    ) -> Option<Reserved> {
        debug_assert!(self.gaps(file, offset, len) == [(offset, len)] || len == 0);
        if len == 0 || len > self.stats.budget {
            self.stats.refused += 1;
            return None;
        }
        while self.stats.resident + len > self.stats.budget {
            let Some((_, &victim)) = self.lru.iter().next() else {
                self.stats.refused += 1;
                return None;
            };
            self.stats.evictions += 1;
            self.remove(victim, true);
        }
        let id = self.next_id;
        self.next_id += 1;
        let slot = Slot::new();
        self.entries.insert(
            (file, offset),
            Entry {
                id,
                len,
                data: Data::Filling(slot.clone()),
                used: Vec::new(),
                tick: 0,
                owner,
            },
        );
        self.stats.resident += len;
        self.stats.peak = self.stats.peak.max(self.stats.resident);
        self.check_budget();
        Some(Reserved {
            file,
            offset,
            len,
            id,
            slot,
        })
    }

    /// Records the end of prefetch `id`: its bytes become ready (or the entry goes,
    /// on error or when a read took all of it while it was filling).
    pub fn complete(&mut self, file: FileId, offset: u64, id: u64, data: Option<Arc<[u8]>>) {
        let key = (file, offset);
        let Some(e) = self.entries.get_mut(&key).filter(|e| e.id == id) else {
            return;
        };
        match data {
            Some(d) if d.len() as u64 == e.len => {
                let used = e.used_bytes();
                e.data = Data::Ready(d);
                self.stats.prefetched += e.len;
                self.stats.used += used;
                let mut orphan = false;
                if let Some(owner) = &e.owner {
                    owner.prefetched_bytes.fetch_add(e.len, Ordering::Relaxed);
                    owner.used_bytes.fetch_add(used, Ordering::Relaxed);
                    orphan = owner.closed.load(Ordering::Relaxed);
                }
                if used == e.len {
                    self.remove(key, false);
                } else if orphan {
                    // Its stream has ended: nobody will read it.
                    self.remove(key, true);
                } else {
                    self.tick += 1;
                    e.tick = self.tick;
                    self.lru.insert(self.tick, key);
                }
            }
            _ => {
                self.remove(key, false);
            }
        }
    }

    /// Drops entry `id` at `(file, offset)` if it is ready and none of its bytes were
    /// used; returns the bytes wasted.
    pub fn expire_if_unused(&mut self, file: FileId, offset: u64, id: u64) -> u64 {
        let key = (file, offset);
        match self.entries.get(&key) {
            Some(e) if e.id == id && e.used.is_empty() && matches!(e.data, Data::Ready(_)) => {
                self.remove(key, true)
            }
            _ => 0,
        }
    }

    /// Drops entry `id` at `(file, offset)` if it is ready, counting its unused bytes
    /// as waste (its stream has ended); returns the bytes wasted.
    pub fn release(&mut self, file: FileId, offset: u64, id: u64) -> u64 {
        let key = (file, offset);
        match self.entries.get(&key) {
            Some(e) if e.id == id && matches!(e.data, Data::Ready(_)) => self.remove(key, true),
            _ => 0,
        }
    }

    /// Whether entry `id` is still filling (so it cannot expire yet).
    pub fn is_filling(&self, file: FileId, offset: u64, id: u64) -> bool {
        matches!(self.entries.get(&(file, offset)),
            Some(e) if e.id == id && matches!(e.data, Data::Filling(_)))
    }

    /// Forgets every entry overlapping `[offset, offset + len)` of `file` (its bytes
    /// changed). Readers already waiting on an in-flight prefetch still get its bytes.
    pub fn invalidate(&mut self, file: FileId, offset: u64, len: u64) {
        for key in self.overlapping(file, offset, offset.saturating_add(len)) {
            self.remove(key, true);
        }
    }

    /// Drops every ready entry, counting unused bytes as waste (end of a run).
    /// Filling entries stay: their workers complete them.
    pub fn drain(&mut self) {
        let ready: Vec<(FileId, u64)> = self.lru.values().copied().collect();
        for key in ready {
            self.remove(key, true);
        }
    }

    /// Number of entries (ready and filling).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(c: &mut Cache, file: FileId, offset: u64, len: u64) -> u64 {
        let r = c.reserve(file, offset, len, None).expect("room");
        assert!(r.slot.start());
        let data: Arc<[u8]> = (0..len).map(|i| (offset + i) as u8).collect();
        r.slot.finish(Ok(data.clone()));
        c.complete(file, offset, r.id, Some(data));
        r.id
    }

    fn bytes(pieces: &[Piece]) -> Vec<Option<u8>> {
        let mut out = Vec::new();
        for p in pieces {
            match p {
                Piece::Ready { data, at, len } => {
                    out.extend(data[*at..at + len].iter().map(|&b| Some(b)))
                }
                Piece::Filling { len, .. } => out.extend(std::iter::repeat_n(None, *len)),
                Piece::Missing { len, .. } => out.extend(std::iter::repeat_n(None, *len as usize)),
            }
        }
        out
    }

    #[test]
    fn ranges_merge() {
        let mut r = Vec::new();
        assert_eq!(add_range(&mut r, 10, 20), 10);
        assert_eq!(add_range(&mut r, 30, 40), 10);
        assert_eq!(add_range(&mut r, 15, 35), 10);
        assert_eq!(r, [(10, 40)]);
        assert_eq!(add_range(&mut r, 0, 5), 5);
        assert_eq!(add_range(&mut r, 5, 10), 5);
        assert_eq!(r, [(0, 40)]);
    }

    #[test]
    fn reads_are_split_into_cached_and_missing_pieces() {
        let mut c = Cache::new(1000);
        fill(&mut c, 1, 100, 50);
        fill(&mut c, 1, 200, 50);
        fill(&mut c, 2, 150, 50);
        let pieces = c.take(1, 120, 120);
        let got = bytes(&pieces);
        assert_eq!(got.len(), 120);
        for (i, b) in got.iter().enumerate() {
            let pos = 120 + i as u64;
            let cached = (120..150).contains(&pos) || (200..240).contains(&pos);
            assert_eq!(b.is_some(), cached, "{pos}");
            if let Some(b) = b {
                assert_eq!(*b, pos as u8);
            }
        }
        assert_eq!(c.gaps(1, 90, 200), [(90, 10), (150, 50), (250, 40)]);
        assert_eq!(c.stats().used, 70);
    }

    #[test]
    fn fully_used_entries_leave_and_partly_used_stay() {
        let mut c = Cache::new(1000);
        fill(&mut c, 0, 0, 100);
        c.take(0, 0, 60);
        assert_eq!(c.len(), 1);
        c.take(0, 50, 50);
        assert!(c.is_empty());
        assert_eq!(c.stats().resident, 0);
        assert_eq!(c.stats().used, 100);
        assert_eq!(c.stats().wasted, 0);
    }

    #[test]
    fn eviction_is_lru_and_counts_waste() {
        let mut c = Cache::new(300);
        let owner = Arc::new(Owner::default());
        for (i, off) in [0u64, 100, 200].iter().enumerate() {
            let r = c.reserve(0, *off, 100, Some(owner.clone())).unwrap();
            let data: Arc<[u8]> = vec![i as u8; 100].into();
            c.complete(0, *off, r.id, Some(data));
        }
        c.take(0, 0, 10); // entry 0 now most recently used, 10 bytes used
        let r = c.reserve(0, 1000, 100, None).unwrap();
        assert_eq!(
            c.gaps(0, 100, 100),
            [(100, 100)],
            "entry at 100 evicted first"
        );
        assert_eq!(c.stats().wasted, 100);
        assert_eq!(owner.wasted_events.load(Ordering::Relaxed), 1);
        assert!(c.stats().resident <= 300);
        // The budget is now held by one filling entry and two ready ones; a request
        // for more than the budget is refused outright.
        assert!(c.reserve(0, 5000, 301, None).is_none());
        c.complete(0, 1000, r.id, None);
        c.drain();
        let s = c.stats();
        assert_eq!(s.prefetched, 300);
        assert_eq!(s.prefetched, s.used + s.wasted);
        assert_eq!(s.resident, 0);
        assert!(s.peak <= 300);
    }

    #[test]
    fn filling_entries_are_never_evicted() {
        let mut c = Cache::new(200);
        let a = c.reserve(0, 0, 100, None).unwrap();
        let _b = c.reserve(0, 100, 100, None).unwrap();
        assert!(c.reserve(0, 200, 1, None).is_none());
        assert_eq!(c.stats().refused, 1);
        assert!(a.slot.start());
        // A read of the started entry waits; a read of the queued one steals it.
        let pieces = c.take(0, 50, 100);
        assert!(matches!(
            pieces[0],
            Piece::Filling {
                at: 50,
                len: 50,
                ..
            }
        ));
        assert!(matches!(
            pieces[1],
            Piece::Missing {
                offset: 100,
                len: 50,
                stolen: true
            }
        ));
        assert_eq!(c.stats().stolen, 1);
        let data: Arc<[u8]> = vec![7u8; 100].into();
        a.slot.finish(Ok(data.clone()));
        c.complete(0, 0, a.id, Some(data));
        assert_eq!(c.stats().used, 50);
        assert_eq!(c.take(0, 0, 50).len(), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn expiry_and_invalidation() {
        let mut c = Cache::new(1000);
        let id = fill(&mut c, 0, 0, 100);
        let used = fill(&mut c, 0, 100, 100);
        c.take(0, 100, 1);
        assert_eq!(c.expire_if_unused(0, 100, used), 0);
        assert_eq!(c.expire_if_unused(0, 0, id + 99), 0);
        assert_eq!(c.expire_if_unused(0, 0, id), 100);
        c.invalidate(0, 150, 1);
        assert!(c.is_empty());
        assert_eq!(c.stats().wasted, 199);
    }

    /// Property test of fill/invalidate interleavings in the prefetch cache, against
    /// a byte vector of the file: prefetches reserved at the file's current size,
    /// started by a worker (bytes read from the file then) and completed later,
    /// writes, truncations and extensions invalidating like the prefetch mount's
    /// (`patio_fs::prefetch`: the range written; from the new size on), and reads
    /// taking what the cache holds (waiting for started fills, reading what is
    /// missing from the file), in the generated order. Every read must return the
    /// file's current bytes: a fill overtaken by a change is never used.
    mod interleavings {
        use super::*;
        use proptest::prelude::*;

        const MAX_SIZE: u64 = 64 << 10;

        #[derive(Clone, Debug)]
        enum Op {
            /// Prefetch `[at, at + len)` (what no entry covers, up to the size).
            Issue {
                at: u64,
                len: u64,
            },
            /// A worker starts the `k`-th queued prefetch: reads its bytes now.
            Start {
                k: usize,
            },
            /// The `k`-th started prefetch completes (full length, or failed).
            Finish {
                k: usize,
            },
            Read {
                at: u64,
                len: u64,
            },
            Write {
                at: u64,
                len: u64,
                seed: u8,
            },
            Resize {
                size: u64,
            },
        }

        fn op() -> impl Strategy<Value = Op> {
            let at = 0..MAX_SIZE + 4096;
            prop_oneof![
                3 => (at.clone(), 1..20_000u64).prop_map(|(at, len)| Op::Issue { at, len }),
                3 => any::<usize>().prop_map(|k| Op::Start { k }),
                3 => any::<usize>().prop_map(|k| Op::Finish { k }),
                4 => (at.clone(), 1..20_000u64).prop_map(|(at, len)| Op::Read { at, len }),
                2 => (at, 1..10_000u64, any::<u8>())
                    .prop_map(|(at, len, seed)| Op::Write { at, len, seed }),
                1 => (0..MAX_SIZE).prop_map(|size| Op::Resize { size }),
            ]
        }

        /// The file's bytes in `[at, at + len)` that exist (a backend read).
        fn read_file(file: &[u8], at: u64, len: u64) -> Vec<u8> {
            let lo = (at as usize).min(file.len());
            let hi = (at.saturating_add(len) as usize).min(file.len());
            file[lo..hi].to_vec()
        }

        /// A worker's end of prefetch `r` with `got`, the bytes it read.
        fn finish(c: &mut Cache, r: Reserved, got: Vec<u8>) {
            if got.len() as u64 == r.len {
                let data: Arc<[u8]> = got.into();
                r.slot.finish(Ok(data.clone()));
                c.complete(r.file, r.offset, r.id, Some(data));
            } else {
                r.slot
                    .finish(Err(Arc::new(io::Error::other("file shrank"))));
                c.complete(r.file, r.offset, r.id, None);
            }
        }

        fn run(initial: Vec<u8>, ops: &[Op]) -> Result<(), TestCaseError> {
            let mut file = initial;
            let mut c = Cache::new(48 << 10);
            let mut queued: Vec<Reserved> = Vec::new();
            let mut started: Vec<(Reserved, Vec<u8>)> = Vec::new();
            for (step, o) in ops.iter().enumerate() {
                let size = file.len() as u64;
                match *o {
                    Op::Issue { at, len } => {
                        let (lo, hi) = (at.min(size), at.saturating_add(len).min(size));
                        for (g, glen) in c.gaps(0, lo, hi - lo) {
                            match c.reserve(0, g, glen, None) {
                                Some(r) => queued.push(r),
                                None => break,
                            }
                        }
                    }
                    Op::Start { k } if !queued.is_empty() => {
                        let r = queued.remove(k % queued.len());
                        if r.slot.start() {
                            let got = read_file(&file, r.offset, r.len);
                            started.push((r, got));
                        }
                    }
                    Op::Finish { k } if !started.is_empty() => {
                        let (r, got) = started.remove(k % started.len());
                        finish(&mut c, r, got);
                    }
                    Op::Read { at, len } => {
                        let n = len.min(size.saturating_sub(at));
                        let pieces = if n > 0 { c.take(0, at, n) } else { Vec::new() };
                        let mut out = Vec::new();
                        for p in pieces {
                            match p {
                                Piece::Ready { data, at, len } => {
                                    out.extend_from_slice(&data[at..at + len])
                                }
                                Piece::Filling {
                                    slot,
                                    at: from,
                                    len,
                                } => {
                                    // The reader waits: its worker completes now.
                                    let i = started
                                        .iter()
                                        .position(|(r, _)| Arc::ptr_eq(&r.slot, &slot));
                                    let i = i.expect("a filling piece was started");
                                    let (r, got) = started.remove(i);
                                    finish(&mut c, r, got);
                                    match slot.wait() {
                                        Ok(d) => out.extend_from_slice(&d[from..from + len]),
                                        Err(_) => {
                                            let o = at + out.len() as u64;
                                            out.extend(read_file(&file, o, len as u64));
                                        }
                                    }
                                }
                                Piece::Missing { offset, len, .. } => {
                                    out.extend(read_file(&file, offset, len))
                                }
                            }
                        }
                        let want = read_file(&file, at, n);
                        prop_assert_eq!(out.len(), want.len(), "step {}: length", step);
                        let bad = (0..want.len()).find(|&i| out[i] != want[i]);
                        prop_assert!(
                            bad.is_none(),
                            "step {}: read {}+{} stale at {:?}",
                            step,
                            at,
                            n,
                            bad.map(|b| b as u64 + at)
                        );
                    }
                    Op::Write { at, len, seed } => {
                        let end = (at + len) as usize;
                        if end > file.len() {
                            file.resize(end, 0);
                        }
                        for (i, b) in file[at as usize..end].iter_mut().enumerate() {
                            *b = seed.wrapping_add(i as u8);
                        }
                        c.invalidate(0, at, len);
                    }
                    Op::Resize { size } => {
                        file.resize(size as usize, 0);
                        c.invalidate(0, size, u64::MAX - size);
                    }
                    Op::Start { .. } | Op::Finish { .. } => {}
                }
                prop_assert!(c.stats().resident <= c.stats().budget, "budget");
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

            #[test]
            fn prefetches_never_outlive_their_data(
                initial in (0..MAX_SIZE, any::<u8>())
                    .prop_map(|(n, s)| (0..n).map(|i| s.wrapping_add(i as u8)).collect()),
                ops in proptest::collection::vec(op(), 1..80),
            ) {
                run(initial, &ops)?;
            }
        }
    }
}
