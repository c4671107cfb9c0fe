//! Model-based tests of the cache without FUSE: random reads through several handles,
//! writes and truncations reported like the passthrough reports them, and changes
//! made behind the cache's back, against a byte vector; budgets and restarts.

use super::core::{CacheConfig, Policy};
use super::graph::Popularity;
use super::*;
use crate::passthrough::{DataChange, FileId, FileReader, Observer};
use patio_prefetch::rng::Rng;
use std::collections::HashSet;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::Duration;

#[path = "interleavings.rs"]
mod interleavings;

fn config(policy: Policy) -> CacheConfig {
    CacheConfig {
        policy,
        memory: 64 << 10,
        disk: 256 << 10,
        segment: 32 << 10,
        item: 4096,
        popularity: Popularity {
            j: 1,
            k: 2,
            max_nodes: 1 << 16,
        },
        idle: Duration::from_secs(3600),
        build_after: 4,
    }
}

fn id_of(f: &File) -> FileId {
    let m = f.metadata().unwrap();
    FileId {
        dev: m.dev(),
        ino: m.ino(),
    }
}

fn observer(src: &Path, dir: &Path, policy: Policy) -> (Arc<Cache>, CacheObserver) {
    observer_of(src, dir, &config(policy))
}

fn observer_of(src: &Path, dir: &Path, cfg: &CacheConfig) -> (Arc<Cache>, CacheObserver) {
    let (cache, _) = open_cache(Some(dir), cfg).unwrap();
    let cache = Arc::new(cache);
    let store = SlowStore::new(StoreConfig::instant());
    let obs = CacheObserver::new(cache.clone(), src.to_path_buf(), store);
    (cache, obs)
}

#[test]
fn reads_follow_writes_truncations_and_outside_changes() {
    for policy in [Policy::None, Policy::Lru, Policy::Group] {
        let src = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = src.path().join("f.bin");
        let mut rng = Rng::new(policy as u64 + 5);
        let mut model: Vec<u8> = (0..200_000).map(|_| rng.below(256) as u8).collect();
        std::fs::write(&path, &model).unwrap();
        let (cache, obs) = observer(src.path(), dir.path(), policy);
        let name: Arc<str> = "f.bin".into();
        let files: Vec<File> = (0..3)
            .map(|_| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap()
            })
            .collect();
        let id = id_of(&files[0]);
        let readers: Vec<Box<dyn FileReader>> = files
            .iter()
            .map(|f| obs.open_reader(&name, id, f).expect("a reader"))
            .collect();
        // A repeated scattered walk (what grouping learns), with random detours.
        let walk: Vec<u64> = (0..24).map(|_| rng.below(190_000)).collect();
        for step in 0..1500usize {
            let h = step % 3;
            match rng.below(40) {
                0 => {
                    let off = rng.below(model.len() as u64 + 5000);
                    let len = rng.range(1, 9000) as usize;
                    let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                    obs.changing(id);
                    files[h].write_all_at(&bytes, off).unwrap();
                    obs.changed(
                        id,
                        DataChange::Written {
                            offset: off,
                            len: len as u64,
                        },
                    );
                    let end = off as usize + len;
                    if end > model.len() {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&bytes);
                }
                1 => {
                    let size = rng.range(100_000, 220_000);
                    obs.changing(id);
                    files[h].set_len(size).unwrap();
                    obs.changed(id, DataChange::Resized { size });
                    model.resize(size as usize, 0);
                }
                2 if step % 7 == 0 => {
                    // Behind the cache's back, a timestamp tick later.
                    std::thread::sleep(Duration::from_millis(15));
                    let off = rng.below(model.len() as u64);
                    let len = rng.range(1, 3000) as usize;
                    let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                    let other = OpenOptions::new().write(true).open(&path).unwrap();
                    other.write_all_at(&bytes, off).unwrap();
                    let end = off as usize + len;
                    if end > model.len() {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&bytes);
                }
                _ => {
                    let at = if rng.below(4) == 0 {
                        rng.below(model.len() as u64 + 100)
                    } else {
                        walk[step / 3 % walk.len()]
                    };
                    let len = rng.range(1, 12_000) as usize;
                    let mut buf = vec![0u8; len];
                    let n = readers[h]
                        .read_at(&files[h], at, &mut buf, h as u32)
                        .unwrap();
                    let lo = (at as usize).min(model.len());
                    let hi = (at as usize + len).min(model.len());
                    assert_eq!(n, hi - lo, "{policy:?} step {step} length");
                    let bad = (0..n).find(|&i| buf[i] != model[lo + i]);
                    assert!(
                        bad.is_none(),
                        "{policy:?} step {step} bytes: read {at}+{len}, first bad at {:?}, size {}",
                        bad.map(|b| b as u64 + at),
                        model.len()
                    );
                }
            }
            let st = lock(&cache.state);
            assert!(st.mem_bytes() <= cache.cfg.memory, "memory budget");
        }
        drop(readers);
        let s = obs.finish(Ended::Unmounted, None);
        assert!(s.stats.peak_memory_bytes <= cache.cfg.memory);
        if policy != Policy::None {
            assert!(
                s.stats.group_hits + s.stats.plain_hits > 0,
                "{policy:?} hits"
            );
            assert!(s.stats.invalidated_items > 0);
            assert!(s.stats.stale_files > 0, "outside changes seen");
            let slots = std::fs::metadata(dir.path().join(SEGMENTS_FILE))
                .unwrap()
                .len();
            assert!(slots <= cache.cfg.disk, "disk budget");
        }
        if policy == Policy::Group {
            assert!(s.stats.group_hits > 0 && s.stats.groups_built > 0);
        }
    }
}

#[test]
fn a_restart_is_warm_and_a_damaged_table_is_cold() {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("g.bin");
    let data: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    // Old enough that the table may record it.
    std::thread::sleep(Duration::from_millis(1100));
    let name: Arc<str> = "g.bin".into();
    let run = |expect_warm: bool| {
        let (_cache, obs) = observer(src.path(), dir.path(), Policy::Lru);
        let f = File::open(&path).unwrap();
        let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
        let mut buf = vec![0u8; 40_000];
        for at in [0u64, 50_000, 100_000] {
            let n = r.read_at(&f, at, &mut buf, 1).unwrap();
            assert_eq!(&buf[..n], &data[at as usize..at as usize + n]);
        }
        drop(r);
        let s = obs.finish(Ended::Unmounted, None);
        assert_eq!(s.stats.warm_items > 0, expect_warm);
        if expect_warm {
            assert!(s.stats.bytes_from_segments > 0, "served from the store");
        }
    };
    run(false);
    run(true);
    let t = dir.path().join(table::TABLE_FILE);
    let mut bytes = std::fs::read(&t).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&t, &bytes).unwrap();
    let (_, note) = open_cache(Some(dir.path()), &config(Policy::Lru)).unwrap();
    assert!(note.unwrap().contains("damaged"));
    // Slots overwritten behind the table's back: checksums turn them into misses.
    run(false);
    run(true);
    let seg = dir.path().join(SEGMENTS_FILE);
    let len = std::fs::metadata(&seg).unwrap().len() as usize;
    std::fs::write(&seg, vec![0xAAu8; len]).unwrap();
    let (_cache, obs) = observer(src.path(), dir.path(), Policy::Lru);
    let f = File::open(&path).unwrap();
    let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
    let mut buf = vec![0u8; 40_000];
    let n = r.read_at(&f, 50_000, &mut buf, 1).unwrap();
    assert_eq!(&buf[..n], &data[50_000..50_000 + n]);
    drop(r);
    assert!(obs.finish(Ended::Unmounted, None).stats.checksum_misses > 0);
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
fn read_items(r: &dyn FileReader, f: &File, data: &[u8], items: &[u64], pid: u32) {
    let mut buf = vec![0u8; 4096];
    for &i in items {
        let at = i * 4096;
        let n = r.read_at(f, at, &mut buf, pid).unwrap();
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
    let name: Arc<str> = "h.bin".into();
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
        let (cache, obs) = observer_of(src.path(), dir.path(), &cfg);
        let f = File::open(&path).unwrap();
        let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
        read_items(r.as_ref(), &f, &data, &order, 1);
        let before = lock(&cache.state).stats.clone();
        assert_eq!(before.source_requests, 48, "{policy:?}: one miss per item");
        read_items(r.as_ref(), &f, &data, &second, 1);
        let after = lock(&cache.state).stats.clone();
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
        obs.finish(Ended::Unmounted, None);
    }
}

#[test]
fn a_rebuilt_group_reads_nothing_cached_from_source() {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("w.bin");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let name: Arc<str> = "w.bin".into();
    let (cache, obs) = observer(src.path(), dir.path(), Policy::Group);
    let f = File::open(&path).unwrap();
    let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
    // A scattered walk of 20 items (more than memory's 16): first read in another
    // order (so the plain slots hold them in that order), then twice as the walk.
    let walk: Vec<u64> = (0..20).map(|i| (i * 7 + 3) % 48).collect();
    let mut first = walk.clone();
    first.sort();
    read_items(r.as_ref(), &f, &data, &first, 2);
    for _ in 0..2 {
        read_items(r.as_ref(), &f, &data, &walk, 1);
    }
    let before = lock(&cache.state).stats.clone();
    assert!(
        !lock(&cache.state).unstored_groups(usize::MAX).is_empty()
            || lock(&cache.state).graph.pending_changes() > 0
    );
    cache.idle_work();
    let mid = lock(&cache.state).stats.clone();
    assert_eq!(mid.source_bytes, before.source_bytes, "nothing from SOURCE");
    assert_eq!(mid.grouping_source_bytes, before.grouping_source_bytes);
    assert!(
        mid.segment_write_bytes > before.segment_write_bytes,
        "groups written"
    );
    assert!(
        mid.grouping_local_bytes > before.grouping_local_bytes,
        "members moved locally"
    );
    assert!(
        mid.segment_read_bytes > before.segment_read_bytes,
        "members beyond memory read back from the store"
    );
    // Nothing changed: the next idle period writes nothing.
    cache.idle_work();
    let last = lock(&cache.state).stats.clone();
    assert_eq!(last.segment_write_bytes, mid.segment_write_bytes);
    assert!(lock(&cache.state).unstored_groups(usize::MAX).is_empty());
    // And the walk is now served by groups, still byte-exact.
    read_items(r.as_ref(), &f, &data, &walk, 1);
    let end = lock(&cache.state).stats.clone();
    // (A strided stretch of the walk may bring its next period ahead; that is
    // grouping I/O, not a read of anything cached.)
    assert_eq!(
        end.source_bytes - end.grouping_source_bytes,
        mid.source_bytes - mid.grouping_source_bytes
    );
    assert!(end.group_hits > mid.group_hits);
    drop(r);
    obs.finish(Ended::Unmounted, None);
}

#[test]
fn a_restart_keeps_plain_slots_plain() {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("p.bin");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 239) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // old enough for the table
    let name: Arc<str> = "p.bin".into();
    let plain = |expect: Option<&HashSet<u32>>| {
        let (cache, obs) = observer(src.path(), dir.path(), Policy::Group);
        let f = File::open(&path).unwrap();
        let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
        if let Some(expect) = expect {
            assert_eq!(&lock(&cache.state).plain_slots, expect);
        }
        read_items(r.as_ref(), &f, &data, &[1, 7, 3, 20], 1);
        let slots = lock(&cache.state).plain_slots.clone();
        drop(r);
        obs.finish(Ended::Unmounted, None);
        slots
    };
    let first = plain(None);
    assert!(!first.is_empty());
    plain(Some(&first));
}

/// Reads `items` through a fresh cache of `policy` as caller 1, byte-checked, and
/// returns the counters.
fn walk(policy: Policy, data: &[u8], items: &[u64]) -> CacheStats {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("s.bin");
    std::fs::write(&path, data).unwrap();
    let name: Arc<str> = "s.bin".into();
    let (cache, obs) = observer(src.path(), dir.path(), policy);
    let f = File::open(&path).unwrap();
    let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
    read_items(r.as_ref(), &f, data, items, 1);
    let stats = lock(&cache.state).stats.clone();
    drop(r);
    obs.finish(Ended::Unmounted, None);
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
    assert!(group.grouping_io_ratio() <= super::core::MAX_GROUPING_RATIO);
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
    // And the LRU inside memory still hits what lru's memory hits (the store's
    // plain slots are replaced a segment at a time, so only memory is exact).
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
    let name: Arc<str> = "c.bin".into();
    let walk: Vec<u64> = vec![5, 40, 12, 33, 2, 27, 19, 8, 5];
    for callers in [1u32, 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(Policy::Group);
        cfg.popularity.j = 2;
        cfg.popularity.k = 4;
        let (cache, obs) = observer_of(src.path(), dir.path(), &cfg);
        let f = File::open(&path).unwrap();
        let r = obs.open_reader(&name, id_of(&f), &f).unwrap();
        for pid in 1..=callers {
            read_items(r.as_ref(), &f, &data, &walk, 10 + pid);
        }
        let groups = lock(&cache.state).graph.groups(8);
        assert_eq!(
            !groups.is_empty(),
            callers == 2,
            "{callers} caller(s): {groups:?}"
        );
        drop(r);
        obs.finish(Ended::Unmounted, None);
    }
}
