//! Tests of the policies through the cache's own interface, without a front end:
//! files opened and read item by item by several callers, idle work, restarts, and
//! the cache directory's checks. (The front end's model tests — changes reported by
//! the passthrough, outside changes, interleavings — are in `patio-fs::segcache`.)

use crate::core::{Cache, MAX_GROUPING_RATIO};
use crate::stats::CacheStats;
use crate::stride::AHEAD_GAP;
use crate::table::{self, Table};
use crate::test_support::config;
use crate::{open_cache, CacheConfig, OpenFile, Policy};
use patio_prefetch::rng::Rng;
use patio_prefetch::{DataFile, SlowStore, StoreConfig};
use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A cache over the directory `dir`.
fn opened(dir: &Path, cfg: &CacheConfig) -> Arc<Cache> {
    Arc::new(open_cache(Some(dir), cfg).unwrap().0)
}

/// A source file opened through the cache, as a front end opens it.
struct Reader {
    file: File,
    open: OpenFile,
}

impl Reader {
    fn open(cache: &Arc<Cache>, src: &Path, name: &str) -> Reader {
        let path = src.join(name);
        let file = File::open(&path).unwrap();
        let store = SlowStore::new(StoreConfig::instant());
        let data = DataFile::open_named(&path, &path, store).unwrap();
        let meta = file.metadata().unwrap();
        let open = cache.open(name, &meta, file.try_clone().unwrap(), Arc::new(data));
        Reader { file, open }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8], pid: u32) -> std::io::Result<usize> {
        self.open.read_at(&self.file, offset, buf, pid)
    }
}

#[test]
fn bad_cache_directories_and_budgets_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(Policy::Group);
    cfg.disk = 16 << 10;
    let err = |c: &CacheConfig, d: &Path| open_cache(Some(d), c).err().unwrap().to_string();
    assert!(err(&cfg, dir.path()).contains("smaller than one segment"));
    let cfg = config(Policy::Group);
    let (_held, _) = open_cache(Some(dir.path()), &cfg).unwrap();
    assert!(err(&cfg, dir.path()).contains("in use by another patio mount"));
    let other = tempfile::tempdir().unwrap();
    let mut t = std::fs::read(dir.path().join(table::TABLE_FILE)).unwrap_or_default();
    if t.is_empty() {
        t = Table {
            generation: 1,
            slot_size: 1,
            slots: 0,
            item_size: 1,
            policy: 2,
            files: vec![],
            segments: vec![],
            counters: vec![],
        }
        .encode();
    }
    t[4] = 99;
    std::fs::write(other.path().join(table::TABLE_FILE), &t).unwrap();
    assert!(err(&cfg, other.path()).contains("newer patio"));
}

/// Reads `items` (item indices of 4 KiB) one item per read through `r` as caller
/// `pid`, checking the bytes against `data`.
fn read_items(r: &Reader, data: &[u8], items: &[u64], pid: u32) {
    let mut buf = vec![0u8; 4096];
    for &i in items {
        let at = i * 4096;
        let n = r.read_at(at, &mut buf, pid).unwrap();
        assert_eq!(
            &buf[..n],
            &data[at as usize..(at as usize + 4096).min(data.len())]
        );
    }
}

#[test]
fn group_caches_what_it_reads_like_lru() {
    // A working set that fits memory + store and is never linked (each successor seen
    // once, j = 3): `group` must serve the second pass like `lru`, from its tiers.
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join("h.bin");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let name = "h.bin";
    let mut rng = Rng::new(11);
    let mut order: Vec<u64> = (0..48).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut second = order.clone();
    second.reverse();
    for policy in [Policy::Lru, Policy::Group] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(policy);
        cfg.popularity.j = 3;
        cfg.popularity.k = 3;
        let cache = opened(dir.path(), &cfg);
        let r = Reader::open(&cache, src.path(), name);
        read_items(&r, &data, &order, 1);
        let before = cache.state().stats.clone();
        assert_eq!(before.source_requests, 48, "{policy:?}: one miss per item");
        read_items(&r, &data, &second, 1);
        let after = cache.state().stats.clone();
        assert_eq!(
            after.source_requests, before.source_requests,
            "{policy:?}: the second pass is served by the cache"
        );
        assert!(
            after.bytes_from_segments > 0,
            "{policy:?}: the store serves"
        );
        assert_eq!(after.group_hits, 0);
        assert!(after.peak_memory_bytes <= cfg.memory);
        drop(r);
        cache.save().unwrap();
    }
}

/// `n` distinct items of `0..within` in a shuffled order (no stride in it).
fn shuffled(seed: u64, n: usize, within: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let mut all: Vec<u64> = (0..within).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i as u64 + 1) as usize);
    }
    all.truncate(n);
    all
}

/// A fresh `group` cache with a source file of `len` bytes open through it: the
/// directories (kept while it is used), the file's bytes, the cache and the reader.
fn group_fixture(
    len: u32,
) -> (
    tempfile::TempDir,
    tempfile::TempDir,
    Vec<u8>,
    Arc<Cache>,
    Reader,
) {
    let (src, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
    std::fs::write(src.path().join("g.bin"), &data).unwrap();
    let cache = opened(dir.path(), &config(Policy::Group));
    let r = Reader::open(&cache, src.path(), "g.bin");
    (src, dir, data, cache, r)
}

#[test]
fn a_group_built_on_a_miss_reads_nothing_cached_from_source() {
    let (_src, _dir, data, cache, r) = group_fixture(800_000);
    // A walk of 20 items read twice forms groups; then 56 other items push all but
    // its last 8 out of what an LRU of the store (64 items) would hold.
    let walk = shuffled(7, 20, 48);
    for _ in 0..2 {
        read_items(&r, &data, &walk, 1);
    }
    let other: Vec<u64> = shuffled(9, 56, 56).iter().map(|i| 100 + i).collect();
    read_items(&r, &data, &other, 2);
    let held: Vec<u64> = {
        let st = cache.state();
        walk.iter()
            .copied()
            .filter(|&i| st.holds(&crate::Item { file: 0, index: i }))
            .collect()
    };
    assert_eq!(held.len(), 8, "{held:?}");
    // Another caller reads those 8 again: the most recent items, not the first to
    // leave when a segment takes a slot of the item region.
    read_items(&r, &data, &held, 3);
    let before = cache.state().stats.clone();
    // The walk again: its first miss builds the group's segment from SOURCE for the
    // members nobody holds and from the store for the rest; every item is read from
    // SOURCE at most once.
    read_items(&r, &data, &walk, 1);
    let after = cache.state().stats.clone();
    assert_eq!(after.stride_batches, 0, "no stride in the walk");
    assert_eq!(
        after.source_bytes - before.source_bytes,
        (walk.len() - held.len()) as u64 * 4096,
        "only the members nobody held came from SOURCE"
    );
    assert!(after.segment_write_bytes > before.segment_write_bytes);
    assert!(
        after.segment_read_bytes > before.segment_read_bytes,
        "members held in the store were read back from there"
    );
    assert!(after.group_hits > before.group_hits);
    drop(r);
    cache.save().unwrap();
}

#[test]
fn a_group_of_members_an_lru_of_the_store_holds_is_not_built() {
    // A walk of 20 items fits the store (64 items): its groups would save no SOURCE
    // request against an LRU of the store, so no segment is built for them, on a
    // read or in an idle period, and the walk is served by the item region.
    let (_src, _dir, data, cache, r) = group_fixture(200_000);
    let walk = shuffled(7, 20, 48);
    read_items(&r, &data, &walk, 1);
    let first = cache.state().stats.clone();
    assert_eq!(first.source_requests, 20);
    for _ in 0..3 {
        read_items(&r, &data, &walk, 1);
        cache.idle_work();
    }
    let st = cache.state();
    assert!(!st.graph.groups(8).is_empty(), "the walk formed groups");
    assert!(st.unstored_groups(usize::MAX).is_empty());
    assert_eq!(st.stats.source_requests, first.source_requests);
    assert_eq!(st.stats.grouping_io_bytes, 0, "{:?}", st.stats);
    assert!(st.slot_items.values().all(|v| v.is_empty()), "no segment");
}

#[test]
fn a_restart_keeps_plain_slots_plain() {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("p.bin");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 239) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // old enough for the table
    let name = "p.bin";
    let plain = |expect: Option<&BTreeSet<u32>>| {
        let cache = opened(dir.path(), &config(Policy::Group));
        let r = Reader::open(&cache, src.path(), name);
        if let Some(expect) = expect {
            assert_eq!(cache.state().plain.slots(), expect);
        }
        read_items(&r, &data, &[1, 7, 3, 20], 1);
        let slots = cache.state().plain.slots().clone();
        drop(r);
        cache.save().unwrap();
        slots
    };
    let first = plain(None);
    assert!(!first.is_empty());
    plain(Some(&first));
}

#[test]
fn after_a_warm_start_with_segments_new_items_are_still_stored() {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("r.bin");
    let data: Vec<u8> = (0..800_000u32).map(|i| (i % 233) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // old enough for the table
    let name = "r.bin";
    // A walk of 72 items, more than the store's 64: its groups save requests.
    let walk = shuffled(11, 72, 96);
    {
        let cache = opened(dir.path(), &config(Policy::Group));
        // Pinned at its full share: the walk's groups are stored.
        cache.state().fix_share(Some(4));
        let r = Reader::open(&cache, src.path(), name);
        for _ in 0..3 {
            read_items(&r, &data, &walk, 1);
            cache.idle_work();
        }
        assert!(!cache.state().slot_items.is_empty(), "segments stored");
        // Then enough other items that every slot is taken.
        let other: Vec<u64> = (100..150).collect();
        read_items(&r, &data, &other, 3);
        assert!(!cache.state().alloc.has_free());
        drop(r);
        cache.save().unwrap();
    }
    let cache = opened(dir.path(), &config(Policy::Group));
    let r = Reader::open(&cache, src.path(), name);
    // 24 items never read (more than memory's 16): the second pass is served by the
    // store, so the first one put them there.
    let fresh: Vec<u64> = (160..184).collect();
    let demand = |s: &CacheStats| s.source_bytes - s.grouping_source_bytes;
    read_items(&r, &data, &fresh, 2);
    let before = demand(&cache.state().stats);
    read_items(&r, &data, &fresh, 2);
    assert_eq!(demand(&cache.state().stats), before);
    drop(r);
}

/// Reads `items` through a fresh cache of `policy` as caller 1, byte-checked, and
/// returns the counters.
fn walk(policy: Policy, data: &[u8], items: &[u64]) -> CacheStats {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("s.bin");
    std::fs::write(&path, data).unwrap();
    let name = "s.bin";
    let cache = opened(dir.path(), &config(policy));
    let r = Reader::open(&cache, src.path(), name);
    read_items(&r, data, items, 1);
    let stats = cache.state().stats.clone();
    drop(r);
    cache.save().unwrap();
    stats
}

#[test]
fn a_strided_stream_is_brought_ahead_on_its_first_pass() {
    let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    let strided: Vec<u64> = (0..33).map(|i| i * 3).collect();
    let lru = walk(Policy::Lru, &data, &strided);
    let group = walk(Policy::Group, &data, &strided);
    assert_eq!(lru.misses, 33, "a first pass misses every item under lru");
    assert!(group.stride_batches > 0);
    assert!(
        group.misses <= 8 && group.group_hits >= 25,
        "the stream's next periods were ahead: {group:?}"
    );
    assert!(group.grouping_io_ratio() <= MAX_GROUPING_RATIO);
}

#[test]
fn a_strided_stream_with_far_periods_is_read_on_demand() {
    // Periods 300 items of 4 KiB apart (1.2 MiB, beyond AHEAD_GAP): bringing them
    // ahead would save no request; the stream is read like lru reads it.
    let stride = (AHEAD_GAP / 4096) + 44;
    let reads = 12u64;
    let data: Vec<u8> = (0..(reads * stride + 1) * 4096)
        .map(|i| (i % 241) as u8)
        .collect();
    let far: Vec<u64> = (0..reads).map(|i| i * stride).collect();
    let lru = walk(Policy::Lru, &data, &far);
    let group = walk(Policy::Group, &data, &far);
    assert_eq!(group.stride_batches, 0, "{group:?}");
    assert_eq!(group.grouping_source_bytes, 0);
    assert_eq!(group.misses, lru.misses);
    assert_eq!(group.source_requests, lru.source_requests);
}

#[test]
fn groups_that_do_not_pay_stop_being_formed() {
    // Runs of four consecutive items, each run elsewhere: every run confirms a
    // stride whose next periods are never read.
    let data: Vec<u8> = (0..8_000_000u32).map(|i| (i % 247) as u8).collect();
    let mut rng = Rng::new(3);
    let items: Vec<u64> = (0..300)
        .flat_map(|_| {
            let at = rng.below(1900);
            [at, at + 1, at + 2, at + 3]
        })
        .collect();
    let lru = walk(Policy::Lru, &data, &items);
    let group = walk(Policy::Group, &data, &items);
    // Without the judgement every run would bring its periods ahead (300 batches);
    // with it the file's groups are switched off after 64 wasted items and given
    // another chance only after 1024 misses.
    assert!(group.stride_batches > 0);
    assert!(group.stride_batches < 100, "{group:?}");
    // And the LRU inside memory still hits what lru's memory hits.
    assert!(
        group.bytes_from_memory >= lru.bytes_from_memory,
        "lru {lru:?}\ngroup {group:?}"
    );
}

#[test]
fn successors_are_learned_across_callers() {
    // Each of two callers reads the walk once: no caller saw a successor twice,
    // together they did (j = 2 of k = 4), so the walk forms groups.
    let src = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 233) as u8).collect();
    let path = src.path().join("c.bin");
    std::fs::write(&path, &data).unwrap();
    let name = "c.bin";
    let walk: Vec<u64> = vec![5, 40, 12, 33, 2, 27, 19, 8, 5];
    for callers in [1u32, 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(Policy::Group);
        cfg.popularity.j = 2;
        cfg.popularity.k = 4;
        let cache = opened(dir.path(), &cfg);
        let r = Reader::open(&cache, src.path(), name);
        for pid in 1..=callers {
            read_items(&r, &data, &walk, 10 + pid);
        }
        let groups = cache.state().graph.groups(8);
        assert_eq!(
            !groups.is_empty(),
            callers == 2,
            "{callers} caller(s): {groups:?}"
        );
        drop(r);
        cache.save().unwrap();
    }
}
