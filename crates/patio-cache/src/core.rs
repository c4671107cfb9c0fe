//! The two-tier cache behind `patio mount cache`: memory, then the segment store on
//! local disk, then SOURCE (read through the storage model). Items are (file, aligned
//! extent of `item` bytes).
//!
//! * `none`: every read goes to SOURCE.
//! * `lru`: a plain block cache — items missed are read from SOURCE (consecutive ones
//!   in one request), kept in memory (LRU under the memory budget) and written to an
//!   item-sized slot of the store (LRU over slots, every hit refreshing its item's
//!   slot: an exact LRU of the store's size); a memory miss that the store holds
//!   reads that one slot.
//! * `group`: a block cache like `lru` with groups as prefetch units on top. The
//!   store (the memory and disk budgets are the ones `lru` gets) is split a slot at
//!   a time into an *item region* ([`crate::plain`]) and the segments of groups. The
//!   item region is an exact LRU of items in item-sized cells: every item a reader
//!   asks for (missed, or served by a group) is put there, so it holds what `lru`'s
//!   store of its size holds. The segments get the *group share*
//!   ([`crate::share`]): at most half of the store, following what groups earn
//!   against what they cost, down to zero, where no group is formed and `group` is
//!   exactly `lru` — the region has the whole store. Memory is [`crate::memtier`]: an LRU of
//!   demand items beside the items groups bring *ahead* of demand, in at most half
//!   of it, so it hits whatever an LRU of the other half hits. Groups come from
//!   two sources. The successor graph
//!   ([`crate::graph`], fed by every caller's stream, across processes) gives
//!   strongly connected components split to a segment, rebuilt when the graph changed,
//!   on a miss and in idle periods; a miss on a grouped item reads its segment from
//!   the store if it is there (a *group hit*), else builds it — members held in
//!   memory or in other slots are reused, only the rest is read from SOURCE — and
//!   writes it; the other members come ahead. A strided stream ([`crate::stride`])
//!   brings its next periods ahead at once. Groups compete for their place: a file
//!   whose ahead items are mostly dropped unused gets no more groups for a while,
//!   and grouping I/O stays within [`MAX_GROUPING_RATIO`] × the bytes served.
//!
//! The fill paths that touch the segment store live in [`crate::fill`].
//!
//! **Never stale.** Every read first compares the file's size, mtime, ctime and inode
//! with what was recorded when its items were cached; a difference drops every item of
//! the file. A write through the mount drops the items it overlaps (and the last one,
//! if the file grows) before the write returns, and bumps the file's epoch: data read
//! from SOURCE or the store before a change is not inserted after it. A read fills
//! under the epoch of its check, the one its size belongs to, so an item cut at the
//! size before an extension cannot be inserted after it. Every stored item
//! carries a CRC32C, checked when its slot is read; a mismatch is a miss.
//!
//! **Budgets.** Items in memory never exceed the memory budget (reads copy out of
//! shared item buffers); the slot file is `slots × slot size` ≤ the disk budget.
//!
//! **Faults of the cache itself** (the store cannot be read or written) switch the
//! cache off for the rest of the mount: reads go to SOURCE, and the reason is kept.

pub use crate::config::{CacheConfig, Policy};
use crate::graph::{Item, SuccessorGraph};
use crate::memtier::MemTier;
use crate::pay::Pay;
use crate::plain::Plain;
use crate::share::Share;
use crate::stats::CacheStats;
use crate::store::{SegmentFile, SlotAllocator};
use crate::stride::Strides;
use crate::table::{Entry, FileRec};
use patio_core::FileVersion;
use patio_prefetch::DataFile;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Callers whose successor streams are followed at once (more: all start again).
const MAX_STREAMS: usize = 4096;
/// Share of the memory budget items brought ahead of demand may hold (`group`).
const AHEAD_SHARE: u64 = 2;
/// Share of the store group segments may ever hold (`group`): at most
/// 1/`GROUP_SHARE` of its slots.
const GROUP_SHARE: usize = 2;
/// Grouping I/O stays within this many times the bytes delivered to readers.
pub const MAX_GROUPING_RATIO: f64 = 1.5;

/// A source file the cache has seen: its recorded version, whether its groups pay,
/// its epoch and, while it is open, its SOURCE reader.
pub struct FileState {
    pub rec: FileRec,
    pub pay: Pay,
    /// Bumped by every change; fills begun under an older epoch are not inserted.
    pub epoch: u64,
    /// The open source file (read through the storage model) while handles are open.
    pub data: Option<Arc<DataFile>>,
    pub stat_file: Option<File>,
    pub open: usize,
}

/// Everything under the cache's lock.
pub struct State {
    pub files: Vec<FileState>,
    pub by_id: HashMap<(u64, u64), u32>,
    mem: MemTier,
    /// Item → the slot holding it and where; a slot's other entries are stale.
    pub disk: HashMap<Item, (u32, Entry)>,
    pub slot_items: HashMap<u32, Vec<Item>>,
    pub alloc: SlotAllocator,
    pub graph: SuccessorGraph,
    plan: HashMap<Item, usize>,
    groups: Vec<Vec<Item>>,
    pub stats: CacheStats,
    pub last_request: Instant,
    /// The store changed since the table was last saved.
    pub dirty: bool,
    pub disabled: Option<String>,
    /// The last item of each caller's successor stream.
    pub prev: HashMap<u32, Item>,
    /// Each caller's stream of request starts, for strides.
    pub strides: Strides,
    /// The item region of the store (`group`): the slots holding items readers
    /// asked for, an exact LRU.
    pub plain: Plain,
    /// Slots the segments of groups may hold (`group`).
    pub share: Share,
    /// Bumped every time a slot is handed out: a write that finds its slot's number
    /// changed lost the slot meanwhile and records nothing.
    pub(crate) slot_uses: HashMap<u32, u64>,
    /// Items per segment.
    pub(crate) per: usize,
    pub(crate) policy: Policy,
}

/// The source file at `rel` as it is now (its version by the core's one rule,
/// `patio_core::FileVersion`).
pub(crate) fn stat_of(rel: &str, m: &Metadata) -> FileRec {
    let v = FileVersion::from_metadata(m);
    FileRec {
        path: rel.to_string(),
        dev: v.dev,
        ino: v.ino,
        size: v.size,
        mtime_ns: v.mtime_ns as i64,
        ctime_ns: v.ctime_ns as i64,
    }
}

fn version(r: &FileRec) -> FileVersion {
    FileVersion {
        dev: r.dev,
        ino: r.ino,
        size: r.size,
        mtime_ns: r.mtime_ns.into(),
        ctime_ns: r.ctime_ns.into(),
    }
}

fn same_version(a: &FileRec, b: &FileRec) -> bool {
    version(a) == version(b)
}

impl State {
    pub fn new(cfg: &CacheConfig, slots: u32) -> Self {
        let per = (cfg.segment / cfg.item).max(1) as usize;
        let (pages, max) = match cfg.policy {
            Policy::Group => (slots as usize * per, slots as usize / GROUP_SHARE),
            _ => (0, 0),
        };
        State {
            files: Vec::new(),
            by_id: HashMap::new(),
            mem: MemTier::new(
                cfg.memory,
                if cfg.policy == Policy::Group {
                    cfg.memory / AHEAD_SHARE
                } else {
                    0
                },
            ),
            disk: HashMap::new(),
            slot_items: HashMap::new(),
            alloc: SlotAllocator::new(slots),
            graph: SuccessorGraph::new(cfg.popularity),
            plan: HashMap::new(),
            groups: Vec::new(),
            stats: CacheStats::default(),
            last_request: Instant::now(),
            dirty: false,
            disabled: None,
            prev: HashMap::new(),
            strides: Strides::default(),
            plain: Plain::new(per as u32, cfg.item, pages, 0),
            share: Share::new(max, per, pages),
            slot_uses: HashMap::new(),
            per,
            policy: cfg.policy,
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Items the item region always holds at least (`group`): the store less the
    /// most the group share may take.
    pub fn protected_items(&self) -> usize {
        (self.alloc.slots() as usize - self.share.max()) * self.per
    }

    /// A reader asked for `item` (a hit or a fill): under `lru` its slot becomes the
    /// most recently used (`group`'s item region is told by [`Cache::plain_put`]).
    pub(crate) fn demanded(&mut self, item: Item) {
        if self.policy == Policy::Lru {
            if let Some(&(slot, _)) = self.disk.get(&item) {
                self.alloc.touch(slot);
            }
        }
    }

    /// Whether a group's segment may be stored now.
    pub(crate) fn segment_room(&self) -> bool {
        self.policy != Policy::Group || self.share.on()
    }

    /// The valid entries of `slot`.
    pub(crate) fn entries_of(&self, slot: u32) -> Vec<Entry> {
        if self.plain.owns(slot) {
            return self.plain.entries(slot);
        }
        self.slot_items
            .get(&slot)
            .into_iter()
            .flatten()
            .filter_map(|i| {
                self.disk
                    .get(i)
                    .filter(|(s, _)| *s == slot)
                    .map(|(_, e)| *e)
            })
            .collect()
    }

    pub fn mem_bytes(&self) -> u64 {
        self.mem.bytes()
    }

    /// Items a strided stream may bring ahead per period batch: the ahead share of
    /// memory split among the strided streams.
    pub(crate) fn ahead_items(&self, item: u64) -> u64 {
        self.mem.ahead_cap() / item / self.strides.active().max(1) as u64
    }

    pub(crate) fn holds(&self, item: &Item) -> bool {
        self.mem.contains(item) || self.disk.contains_key(item) || self.plain.contains(item)
    }

    /// A reader's lookup of `item` in memory: its bytes and whether a group brought
    /// it ahead of this first use (which counts for the group's file).
    pub(crate) fn mem_get(&mut self, item: Item) -> Option<(Arc<Vec<u8>>, bool)> {
        let found = self.mem.get(item)?;
        if found.was_ahead {
            self.files[item.file as usize].pay.used += 1;
        }
        Some((found.data, found.was_ahead))
    }

    /// The bytes of `item` if memory holds it, without counting as a use.
    pub(crate) fn mem_peek(&self, item: Item) -> Option<Arc<Vec<u8>>> {
        self.mem.peek(item)
    }

    /// Inserts `item` unless its file changed since epoch `epoch`: as a demand item,
    /// or `ahead` of demand (brought by a group).
    pub(crate) fn mem_put(&mut self, item: Item, data: Arc<Vec<u8>>, ahead: bool, epoch: u64) {
        if self.files[item.file as usize].epoch != epoch {
            return;
        }
        if ahead {
            self.mem.put_ahead(item, data);
        } else {
            self.mem.put_demand(item, data);
        }
        for w in self.mem.take_wasted() {
            let pay = &mut self.files[w.file as usize].pay;
            pay.wasted += 1;
            pay.judge();
        }
        self.stats.peak_memory_bytes = self.stats.peak_memory_bytes.max(self.mem.bytes());
    }

    /// A lookup of `file` missed both tiers.
    pub(crate) fn missed(&mut self, file: u32) {
        self.files[file as usize].pay.missed();
    }

    /// Whether the groups of every file of `items` pay.
    pub(crate) fn groups_pay(&self, items: &[Item]) -> bool {
        items.iter().all(|i| self.files[i.file as usize].pay.on())
    }

    /// Whether grouping I/O of `cost` more bytes stays within
    /// [`MAX_GROUPING_RATIO`] × the bytes delivered to readers.
    pub(crate) fn grouping_affords(&self, cost: u64) -> bool {
        let s = &self.stats;
        (s.grouping_io_bytes + cost) as f64 <= MAX_GROUPING_RATIO * s.delivered() as f64
    }

    /// Drops `item` from both tiers.
    fn drop_item(&mut self, item: Item) -> bool {
        let had = self.holds(&item);
        self.mem.remove(item);
        if self.disk.remove(&item).is_some() | self.plain.remove(&item) {
            self.dirty = true;
        }
        had
    }

    /// Drops the items of `file` with index ≥ `from` and ≤ `to`.
    pub fn drop_range(&mut self, file: u32, from: u64, to: u64) {
        let mut victims: Vec<Item> = if to - from < 4096 {
            (from..=to).map(|index| Item { file, index }).collect()
        } else {
            self.mem
                .items()
                .chain(self.disk.keys())
                .chain(self.plain.items())
                .filter(|i| i.file == file && i.index >= from && i.index <= to)
                .copied()
                .collect()
        };
        victims.sort();
        victims.dedup();
        for v in victims {
            if self.drop_item(v) {
                self.stats.invalidated_items += 1;
            }
        }
        self.files[file as usize].epoch += 1;
    }

    /// The file changed as `now` says: if that is not the version recorded, every
    /// item of the file goes. Returns whether it did.
    pub fn revalidate(&mut self, file: u32, now: FileRec) -> bool {
        let rec = &self.files[file as usize].rec;
        if same_version(rec, &now) {
            return false;
        }
        self.drop_range(file, 0, u64::MAX);
        self.graph.forget_file(file);
        self.files[file as usize].rec = now;
        true
    }

    /// The slot holding every item of `group`, if one does.
    fn slot_of(&self, group: &[Item]) -> Option<u32> {
        let slot = self.disk.get(&group[0]).map(|(s, _)| *s)?;
        group
            .iter()
            .all(|i| self.disk.get(i).map(|(s, _)| *s) == Some(slot))
            .then_some(slot)
    }

    /// Planned groups not stored whole in one segment slot, at most `n`, whose
    /// items' files are open and whose build would save SOURCE requests against an
    /// LRU of the whole store.
    pub fn unstored_groups(&self, n: usize) -> Vec<Vec<Item>> {
        self.groups
            .iter()
            .filter(|g| self.slot_of(g).is_none())
            .filter(|g| g.iter().all(|i| self.files[i.file as usize].data.is_some()))
            .filter(|g| self.groups_pay(g))
            .filter(|g| self.build_saves(g, None))
            .take(n)
            .cloned()
            .collect()
    }

    /// At most the grouping I/O of building `group`'s segment (items of `item`
    /// bytes): members memory does not hold read, every member written.
    pub(crate) fn fill_cost(&self, group: &[Item], item: u64) -> u64 {
        let absent = group.iter().filter(|i| !self.mem.contains(i)).count() as u64;
        (absent + group.len() as u64) * item
    }

    /// Records `entries` (with the epochs their data was read under) as held by
    /// `slot` if the slot is still the one claimed as use `uses` and their files did
    /// not change meanwhile.
    pub(crate) fn record(&mut self, slot: u32, uses: u64, entries: Vec<(Entry, u64)>) {
        if self.slot_uses.get(&slot) != Some(&uses) {
            return;
        }
        let mut kept = Vec::new();
        for (e, ep) in entries {
            if self.files[e.item.file as usize].epoch != ep {
                continue;
            }
            self.disk.insert(e.item, (slot, e));
            kept.push(e.item);
        }
        self.slot_items.entry(slot).or_default().extend(kept);
        self.dirty = true;
    }

    /// Rebuilds the groups from the graph.
    pub fn rebuild(&mut self, per_segment: usize) {
        if self.graph.take_changes() == 0 && !self.groups.is_empty() {
            return;
        }
        let groups = self.graph.groups(per_segment);
        self.plan.clear();
        for (g, items) in groups.iter().enumerate() {
            for i in items {
                self.plan.insert(*i, g);
            }
        }
        // A group whose items already share one segment, all valid there, is reused.
        for items in &groups {
            if self.slot_of(items).is_some() {
                self.stats.groups_reused += 1;
            } else {
                self.stats.groups_built += 1;
            }
        }
        self.stats.group_builds += 1;
        self.groups = groups;
    }
}

/// The bytes of consecutive items.
type Items = Vec<Arc<Vec<u8>>>;

/// Where an item's bytes came from.
#[derive(Clone, Copy)]
enum Tier {
    Memory,
    Segments,
    Source,
}

/// How one item will be served, decided under the lock.
enum Plan {
    Memory(Arc<Vec<u8>>, bool),
    Slot {
        slot: u32,
        entries: Vec<Entry>,
        grouped: bool,
    },
    Group(Vec<Item>),
    Source {
        last: u64,
    },
}

/// The cache: state under one lock, the slot file beside it.
pub struct Cache {
    pub(crate) cfg: CacheConfig,
    pub(crate) state: Mutex<State>,
    pub(crate) store: Option<SegmentFile>,
    pub(crate) dir: Option<PathBuf>,
    /// The cache directory's lock (`flock`), held while the cache is open.
    pub(crate) _lock: Option<File>,
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Cache {
    /// The policy and budgets the cache was opened with.
    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// The cache's state, locked.
    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Whether the slot file is read and written with `O_DIRECT` (`None`: no store).
    pub fn store_direct(&self) -> Option<bool> {
        self.store.as_ref().map(SegmentFile::direct)
    }

    /// Items of the store readers asked for most recently that no group may displace
    /// ([`State::protected_items`]).
    pub fn protected_items(&self) -> usize {
        lock(&self.state).protected_items()
    }

    fn per_segment(&self) -> usize {
        (self.cfg.segment / self.cfg.item) as usize
    }

    /// Switches the cache off after a fault of its own; reads go to SOURCE from now.
    pub(crate) fn fault(&self, what: &str, e: &io::Error) {
        let mut st = lock(&self.state);
        if st.disabled.is_none() {
            let why = format!("{what}: {e}");
            log::warn!("cache switched off, reads go to SOURCE: {why}");
            st.disabled = Some(why);
        }
        st.mem.clear();
        st.disk.clear();
        st.plain.clear();
        st.dirty = true;
    }

    fn delivered(&self, tier: Tier, n: u64) {
        let mut st = lock(&self.state);
        match tier {
            Tier::Memory => st.stats.bytes_from_memory += n,
            Tier::Segments => st.stats.bytes_from_segments += n,
            Tier::Source => st.stats.bytes_from_source += n,
        }
    }

    /// Serves `buf.len()` bytes of file `file` at `offset` (already revalidated:
    /// `size` its size at `epoch`, what fills are read under) for caller `pid`. The
    /// items it touches continue that caller's successor stream (across its files
    /// and handles).
    pub fn read(
        &self,
        file: u32,
        size: u64,
        epoch: u64,
        offset: u64,
        buf: &mut [u8],
        pid: u32,
    ) -> io::Result<usize> {
        let end = offset.saturating_add(buf.len() as u64).min(size);
        if offset >= end {
            return Ok(0);
        }
        let data = {
            let mut st = lock(&self.state);
            st.stats.reads += 1;
            st.last_request = Instant::now();
            let f = &st.files[file as usize];
            let data = f
                .data
                .clone()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            if self.cfg.policy == Policy::None || st.disabled.is_some() || self.store.is_none() {
                drop(st);
                let got = data.read(offset, end - offset)?;
                buf[..got.len()].copy_from_slice(&got);
                let mut st = lock(&self.state);
                st.stats.source_requests += 1;
                st.stats.source_bytes += got.len() as u64;
                st.stats.bytes_from_source += got.len() as u64;
                return Ok(got.len());
            }
            data
        };
        let b = self.cfg.item;
        let mut index = offset / b;
        let last = (end - 1) / b;
        let first = index;
        while index <= last {
            let item = Item { file, index };
            let (got, upto, tier) = self.item(item, last, size, epoch, &data)?;
            let mut delivered = 0u64;
            if got.is_empty() {
                // The file ended before this item (truncated meanwhile).
                return Ok(((index * b).max(offset) - offset) as usize);
            }
            for (k, bytes) in got.iter().enumerate() {
                let at = (index + k as u64) * b;
                let lo = offset.max(at);
                let need = end.min(at + b);
                let hi = need.min(at + bytes.len() as u64);
                if hi > lo {
                    buf[(lo - offset) as usize..(hi - offset) as usize]
                        .copy_from_slice(&bytes[(lo - at) as usize..(hi - at) as usize]);
                    delivered += hi - lo;
                }
                if hi < need {
                    self.delivered(tier, delivered);
                    // The file ended inside this item (truncated meanwhile).
                    return Ok((hi.max(lo) - offset) as usize);
                }
            }
            self.delivered(tier, delivered);
            if self.cfg.policy == Policy::Group {
                // Every item a reader asked for goes to the item region (the LRU).
                let run: Vec<_> = got
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| !d.is_empty())
                    .map(|(k, d)| {
                        (
                            Item {
                                file,
                                index: index + k as u64,
                            },
                            d.clone(),
                            epoch,
                        )
                    })
                    .collect();
                if let Err(e) = self.plain_put(&run) {
                    self.fault("writing the segment store", &e);
                }
            }
            let mut st = lock(&self.state);
            for k in index..=upto {
                st.demanded(Item { file, index: k });
            }
            if self.cfg.policy == Policy::Group {
                for k in index..=upto {
                    let it = Item { file, index: k };
                    let prev = st.prev.get(&pid).copied();
                    st.graph.observe(prev, it);
                    if st.prev.len() >= MAX_STREAMS && !st.prev.contains_key(&pid) {
                        st.prev.clear();
                    }
                    st.prev.insert(pid, it);
                }
            }
            index = upto + 1;
        }
        if self.cfg.policy == Policy::Group {
            if let Err(e) = self.stride_ahead(pid, file, (first, last), size, epoch, &data) {
                self.fault("writing the segment store", &e);
            }
        }
        Ok((end - offset) as usize)
    }

    /// The bytes of `item` (and, for a run read from SOURCE, of the items after it up
    /// to at most `last`): the items' data in order and the last index served.
    fn item(
        &self,
        item: Item,
        last: u64,
        size: u64,
        epoch: u64,
        data: &Arc<DataFile>,
    ) -> io::Result<(Items, u64, Tier)> {
        let plan = self.plan(item, last);
        let src = |r: io::Result<(Items, u64)>| r.map(|(v, l)| (v, l, Tier::Source));
        match plan {
            Plan::Memory(bytes, grouped) => {
                let mut st = lock(&self.state);
                st.stats.accesses += 1;
                if grouped {
                    st.stats.group_hits += 1;
                } else {
                    st.stats.plain_hits += 1;
                }
                Ok((vec![bytes], item.index, Tier::Memory))
            }
            Plan::Slot {
                slot,
                entries,
                grouped,
            } => match self.read_slot(slot, &entries, grouped, item, epoch) {
                Ok(Some(bytes)) => Ok((vec![bytes], item.index, Tier::Segments)),
                Ok(None) => src(self.read_source(item, item.index, size, data, epoch)),
                Err(e) => {
                    self.fault("reading the segment store", &e);
                    src(self.read_source(item, item.index, size, data, epoch))
                }
            },
            Plan::Group(items) => {
                let got = self.fill_group(Some((item, data.clone(), epoch)), &items);
                match got {
                    Ok(Some(bytes)) => Ok((vec![bytes], item.index, Tier::Source)),
                    Ok(None) => src(self.read_source(item, item.index, size, data, epoch)),
                    Err(e) => {
                        self.fault("writing the segment store", &e);
                        src(self.read_source(item, item.index, size, data, epoch))
                    }
                }
            }
            Plan::Source { last } => src(self.read_source(item, last, size, data, epoch)),
        }
    }

    /// Decides under the lock how `item` is served; `last` bounds a SOURCE run.
    fn plan(&self, item: Item, last: u64) -> Plan {
        let mut st = lock(&self.state);
        let group = self.cfg.policy == Policy::Group;
        // A hit served by groups on an item the item region neither holds nor would
        // hold without the share is one groups earned (a full-size LRU would miss).
        let in_region = st.plain.entry(&item).is_some();
        let earns = group && !st.plain.contains(&item) && !st.plain.is_ghost(&item);
        if let Some((bytes, grouped)) = st.mem_get(item) {
            if grouped && earns {
                st.earned(1);
            }
            return Plan::Memory(bytes, grouped);
        }
        if let Some(&(slot, entry)) = st.disk.get(&item) {
            // A group's segment is read whole (the prefetch) while its file's groups
            // pay, else the item alone (from the item region if it holds it).
            let grouped = group && st.files[item.file as usize].pay.on();
            if grouped || !in_region || !group {
                let entries: Vec<Entry> = if grouped {
                    st.entries_of(slot)
                } else {
                    vec![entry]
                };
                if earns {
                    st.earned(1);
                }
                st.alloc.touch(slot);
                return Plan::Slot {
                    slot,
                    entries,
                    grouped,
                };
            }
        }
        if let Some((slot, entry)) = st.plain.entry(&item) {
            return Plan::Slot {
                slot,
                entries: vec![entry],
                grouped: false,
            };
        }
        if group && st.share.on() {
            if !st.plan.contains_key(&item) && st.graph.pending_changes() >= self.cfg.build_after {
                let per = self.per_segment();
                st.rebuild(per);
            }
            if let Some(&g) = st.plan.get(&item) {
                let group = &st.groups[g];
                if st.groups_pay(group)
                    && st.build_saves(group, Some(item))
                    && st.grouping_affords(st.fill_cost(group, self.cfg.item))
                    && st.segment_room()
                {
                    let group = group.clone();
                    st.missing(std::iter::once(item));
                    return Plan::Group(group);
                }
            }
        }
        let mut end = item.index;
        while end < last {
            let next = Item {
                file: item.file,
                index: end + 1,
            };
            if st.holds(&next) || st.plan.contains_key(&next) {
                break;
            }
            end += 1;
        }
        st.missing((item.index..=end).map(|index| Item {
            file: item.file,
            index,
        }));
        Plan::Source { last: end }
    }

    /// Items `item.index..=last` of one file read from SOURCE in one request, put in
    /// memory (and, for `lru`, in the store).
    fn read_source(
        &self,
        item: Item,
        last: u64,
        size: u64,
        data: &Arc<DataFile>,
        epoch: u64,
    ) -> io::Result<(Items, u64)> {
        let b = self.cfg.item;
        let start = item.index * b;
        let want = ((last + 1) * b).min(size).saturating_sub(start);
        let got = data.read(start, want)?;
        let items: Vec<Arc<Vec<u8>>> = got
            .chunks(b as usize)
            .map(|c| Arc::new(c.to_vec()))
            .collect();
        {
            let mut st = lock(&self.state);
            st.stats.source_requests += 1;
            st.stats.source_bytes += got.len() as u64;
            st.stats.accesses += items.len().max(1) as u64;
            st.stats.misses += items.len().max(1) as u64;
            st.missed(item.file);
        }
        self.keep(item, &items, epoch);
        let served = item.index + items.len().max(1) as u64 - 1;
        Ok((items, served.min(last)))
    }

    /// Completes a fill from SOURCE: `items` (consecutive, the first one `first`),
    /// read under `epoch`, go to memory and, for `lru` and `group`, to the store —
    /// unless their file changed since `epoch`, which drops them.
    pub fn keep(&self, first: Item, items: &[Arc<Vec<u8>>], epoch: u64) {
        let mut st = lock(&self.state);
        let disabled = st.disabled.is_some();
        for (k, bytes) in items.iter().enumerate() {
            let it = Item {
                file: first.file,
                index: first.index + k as u64,
            };
            st.mem_put(it, bytes.clone(), false, epoch);
        }
        drop(st);
        let with_items = || {
            items.iter().enumerate().map(|(k, bytes)| {
                let it = Item {
                    file: first.file,
                    index: first.index + k as u64,
                };
                (it, bytes.clone(), epoch)
            })
        };
        if self.cfg.policy == Policy::Lru && !disabled {
            for one in with_items() {
                if let Err(e) = self.write_slot(&[one], false).map(drop) {
                    self.fault("writing the segment store", &e);
                    break;
                }
            }
        } else if self.cfg.policy == Policy::Group && !disabled {
            let run: Vec<_> = with_items().filter(|(_, d, _)| !d.is_empty()).collect();
            if let Err(e) = self.plain_put(&run) {
                self.fault("writing the segment store", &e);
            }
        }
    }
}
