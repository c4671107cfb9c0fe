//! Model-based tests of the cache without FUSE: random reads through several handles,
//! writes and truncations reported like the passthrough reports them, and changes
//! made behind the cache's back, against a byte vector; budgets and restarts.

use super::*;
use crate::passthrough::{DataChange, FileId, FileReader, Observer};
use patio_cache::dir::SEGMENTS_FILE;
use patio_cache::test_support::config;
use patio_cache::{table, CacheConfig};
use patio_prefetch::rng::Rng;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::Duration;

#[path = "interleavings.rs"]
mod interleavings;

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
            let st = cache.state();
            assert!(st.mem_bytes() <= cache.config().memory, "memory budget");
        }
        drop(readers);
        let s = obs.finish(Ended::Unmounted, None);
        assert!(s.stats.peak_memory_bytes <= cache.config().memory);
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
            assert!(slots <= cache.config().disk, "disk budget");
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
