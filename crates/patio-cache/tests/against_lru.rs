//! The policies alone against a reference LRU: the same trace of item reads goes
//! through a cache opened with patio-cache's own interface (no front end) and through
//! a plain LRU of items; every access the reference hits must be a hit of the cache.
//!
//! * `lru` against an LRU of the whole disk budget (its store holds every item it
//!   cached, in item-sized slots, least recently used out first);
//! * `group` against an LRU of the disk budget less the space groups may hold
//!   ([`Cache::protected_items`], at least half of the store): the store's item
//!   region is an exact LRU of at least that many items, so an LRU of that size hits
//!   nothing `group` misses — whatever the groups do;
//! * `group` with its group share pinned at zero against an LRU of the whole disk
//!   budget, hit for hit and miss for miss: without a share, `group` is `lru`;
//! * `group` on traces that fit the store, its share following earnings, against
//!   an LRU of the whole disk budget: no segment is built (none would save a SOURCE
//!   request), every hit of that LRU is a hit of `group`, and `group` makes no more
//!   SOURCE requests than `lru` but for items it brought ahead that no one used.
//!
//! Traces are random, strided, cyclic and tile-like (the rows of 2-D blocks of a
//! row-major array), from one caller or from several interleaved.

use patio_cache::{open_cache, Cache, CacheConfig, Policy, Popularity};
use patio_prefetch::{DataFile, SlowStore, StoreConfig};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

const ITEM: u64 = 4096;
/// Items of the source file.
const FILE_ITEMS: u64 = 160;

/// Budgets of a few segments: 16 items of memory, 64 of disk in segments of 8.
fn config(policy: Policy) -> CacheConfig {
    CacheConfig {
        policy,
        memory: 16 * ITEM,
        disk: 64 * ITEM,
        segment: 8 * ITEM,
        item: ITEM,
        popularity: Popularity {
            j: 1,
            k: 2,
            max_nodes: 1 << 16,
        },
        idle: Duration::from_secs(3600),
        build_after: 4,
    }
}

/// A plain LRU of `cap` items: the reference.
struct Lru {
    cap: usize,
    order: VecDeque<u64>,
}

impl Lru {
    /// Whether `x` hit; `x` becomes the most recently used.
    fn access(&mut self, x: u64) -> bool {
        let hit = match self.order.iter().position(|&y| y == x) {
            Some(p) => {
                self.order.remove(p);
                true
            }
            None => false,
        };
        self.order.push_back(x);
        if self.order.len() > self.cap {
            self.order.pop_front();
        }
        hit
    }
}

/// One read of a trace: caller and item.
type Read = (u32, u64);

/// What a trace did through a cache.
#[derive(Debug)]
struct Outcome {
    hits: u64,
    ref_hits: u64,
    /// Hits served by groups.
    by_groups: u64,
    source_requests: u64,
    /// Items read from SOURCE for grouping (nobody had asked for them yet).
    grouping_items: u64,
    /// Bytes moved in the store for grouping (segments written, items moved out of
    /// a slot a segment took).
    grouping_local_bytes: u64,
}

/// Runs `trace` through a fresh cache of `policy` (idle work between `idle_every`
/// reads, if given) and through a reference LRU; fails on the first access the
/// reference hits and the cache misses, or on wrong bytes.
fn against(policy: Policy, trace: &[Read], idle_every: Option<usize>) -> Result<Outcome, String> {
    against_with(policy, None, trace, idle_every)
}

/// What the reference LRU is for a run of [`against_ref`].
#[derive(Clone, Copy, PartialEq)]
enum Reference {
    /// An LRU of `Cache::protected_items` (group with a share) or of the whole
    /// store (lru, or group with its share pinned at zero: then hit for hit).
    ByPolicy,
    /// An LRU of the whole store, whatever the share: every hit of it must be one
    /// of the cache (it may hit more).
    WholeStore,
}

/// [`against`] with `group`'s share pinned at `share` slots, if given; pinned at
/// zero, every access must hit exactly when an LRU of the whole store hits.
fn against_with(
    policy: Policy,
    share: Option<usize>,
    trace: &[Read],
    idle_every: Option<usize>,
) -> Result<Outcome, String> {
    against_ref(policy, share, Reference::ByPolicy, trace, idle_every)
}

fn against_ref(
    policy: Policy,
    share: Option<usize>,
    reference: Reference,
    trace: &[Read],
    idle_every: Option<usize>,
) -> Result<Outcome, String> {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("f.bin");
    let data: Vec<u8> = (0..FILE_ITEMS * ITEM).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let cfg = config(policy);
    let cache = Arc::new(open_cache(Some(dir.path()), &cfg).unwrap().0);
    let file = File::open(&path).unwrap();
    let store = SlowStore::new(StoreConfig::instant());
    let reader = Arc::new(DataFile::open_named(&path, &path, store).unwrap());
    let open = cache.open(
        "f.bin",
        &file.metadata().unwrap(),
        file.try_clone().unwrap(),
        reader,
    );
    cache.state().fix_share(share);
    let exact = policy == Policy::Lru || share == Some(0);
    let cap = if exact || reference == Reference::WholeStore {
        (cfg.disk / ITEM) as usize
    } else {
        cache.protected_items()
    };
    let mut lru = Lru {
        cap,
        order: VecDeque::new(),
    };
    let (mut hits, mut ref_hits) = (0u64, 0u64);
    let mut buf = vec![0u8; ITEM as usize];
    for (n, &(pid, x)) in trace.iter().enumerate() {
        if idle_every.is_some_and(|k| n > 0 && n % k == 0) {
            cache.idle_work();
        }
        let misses = cache.state().stats.misses;
        let got = open.read_at(&file, x * ITEM, &mut buf, pid).unwrap();
        let at = (x * ITEM) as usize;
        if buf[..got] != data[at..at + ITEM as usize] {
            return Err(format!("read {n} (item {x}): wrong bytes"));
        }
        let hit = cache.state().stats.misses == misses;
        let ref_hit = lru.access(x);
        if ref_hit && !hit {
            return Err(format!(
                "read {n} (caller {pid}, item {x}): the reference LRU of {cap} items hit, {policy:?} missed"
            ));
        }
        if exact && hit && !ref_hit {
            return Err(format!(
                "read {n} (caller {pid}, item {x}): the reference LRU of {cap} items missed, {policy:?} (share {share:?}) hit"
            ));
        }
        hits += hit as u64;
        ref_hits += ref_hit as u64;
    }
    let st = cache.state();
    let out = Outcome {
        hits,
        ref_hits,
        by_groups: st.stats.group_hits,
        source_requests: st.stats.source_requests,
        grouping_items: st.stats.grouping_source_bytes / ITEM,
        grouping_local_bytes: st.stats.grouping_local_bytes,
    };
    drop(st);
    drop(open);
    Ok(out)
}

fn random() -> impl Strategy<Value = Vec<Read>> {
    proptest::collection::vec((1u32..3, 0..FILE_ITEMS), 50..400)
}

/// Strided streams: start, stride, length, repeated.
fn strided() -> impl Strategy<Value = Vec<Read>> {
    proptest::collection::vec((0..FILE_ITEMS, 1u64..6, 8u64..40), 1..8).prop_map(|runs| {
        runs.iter()
            .cycle()
            .take(runs.len() * 3)
            .flat_map(|&(start, stride, len)| {
                (0..len).map(move |k| (1, (start + k * stride) % FILE_ITEMS))
            })
            .collect()
    })
}

/// A loop of `len` distinct items read `times` times, with random reads between.
fn cyclic() -> impl Strategy<Value = Vec<Read>> {
    (
        20u64..90,
        2usize..5,
        proptest::collection::vec(0..FILE_ITEMS, 0..30),
        any::<u64>(),
    )
        .prop_map(|(len, times, noise, seed)| {
            let base = seed % (FILE_ITEMS - len);
            let mut out = Vec::new();
            for t in 0..times {
                out.extend((0..len).map(|k| (1, base + k)));
                out.extend(noise.iter().skip(t).step_by(times).map(|&x| (2, x)));
            }
            out
        })
}

/// Tiles of a row-major array of 16 × 10 items: each tile read row by row, each
/// caller its own tile, callers interleaved row by row, three passes.
fn tiles() -> impl Strategy<Value = Vec<Read>> {
    proptest::collection::vec((0u64..12, 0u64..6, 2u64..5, 2u64..5), 1..4).prop_map(|ts| {
        let (w, _h) = (16u64, 10u64);
        let mut out = Vec::new();
        for _pass in 0..3 {
            let rows = ts.iter().map(|t| t.3).max().unwrap_or(0);
            for r in 0..rows {
                for (c, &(x, y, tw, th)) in ts.iter().enumerate() {
                    if r < th {
                        out.extend((0..tw).map(|k| (c as u32 + 1, (y + r) * w + x + k)));
                    }
                }
            }
        }
        out
    })
}

/// Traces whose items fit the store (64 items): random reads over 60 items by two
/// callers, a strided stream within 60 items, a shuffled loop of up to 60 items
/// read several times, and the tiles (at most 48 items).
fn fitting() -> impl Strategy<Value = Vec<Read>> {
    prop_oneof![
        proptest::collection::vec((1u32..3, 0u64..60), 50..400),
        (0u64..60, 1u64..6, 20u64..120).prop_map(|(start, stride, len)| (0..len)
            .map(|k| (1, (start + k * stride) % 60))
            .collect()),
        (20u64..60, 2usize..6, any::<u64>()).prop_map(|(len, times, seed)| {
            let mut walk: Vec<u64> = (0..len).collect();
            let mut x = seed | 1;
            for i in (1..walk.len()).rev() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                walk.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
            }
            (0..times)
                .flat_map(|_| walk.iter().map(|&i| (1, 50 + i)))
                .collect()
        }),
        tiles(),
    ]
}

/// A trace that fits the store through `group` with its share following earnings
/// and through `lru`: `group` hits every access an LRU of the whole store hits,
/// builds no segment (none would save a SOURCE request against that LRU), and makes
/// no more SOURCE requests than `lru` but for the items it brought ahead that no
/// reader used.
fn check_fitting(trace: &[Read], idle_every: Option<usize>) -> Result<(), TestCaseError> {
    let distinct: std::collections::BTreeSet<u64> = trace.iter().map(|r| r.1).collect();
    prop_assume!(distinct.len() as u64 <= config(Policy::Group).disk / ITEM);
    let lru = against(Policy::Lru, trace, idle_every).map_err(TestCaseError::fail)?;
    let group = against_ref(
        Policy::Group,
        None,
        Reference::WholeStore,
        trace,
        idle_every,
    )
    .map_err(TestCaseError::fail)?;
    prop_assert_eq!(group.grouping_local_bytes, 0, "{:?}", group);
    let unused_ahead = group.grouping_items.saturating_sub(group.by_groups);
    prop_assert!(
        group.source_requests <= lru.source_requests + unused_ahead,
        "lru {:?}\ngroup {:?}",
        lru,
        group
    );
    Ok(())
}

fn check(trace: &[Read], idle_every: Option<usize>) -> Result<(), TestCaseError> {
    for policy in [Policy::Lru, Policy::Group] {
        against(policy, trace, idle_every).map_err(TestCaseError::fail)?;
    }
    against_with(Policy::Group, Some(0), trace, idle_every).map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_traces(trace in random(), idle in proptest::option::of(20usize..80)) {
        check(&trace, idle)?;
    }

    #[test]
    fn strided_traces(trace in strided(), idle in proptest::option::of(20usize..80)) {
        check(&trace, idle)?;
    }

    #[test]
    fn cyclic_traces(trace in cyclic(), idle in proptest::option::of(20usize..80)) {
        check(&trace, idle)?;
    }

    #[test]
    fn tile_traces(trace in tiles(), idle in proptest::option::of(20usize..80)) {
        check(&trace, idle)?;
    }

    #[test]
    fn traces_that_fit_the_store(trace in fitting(), idle in proptest::option::of(20usize..80)) {
        check_fitting(&trace, idle)?;
    }
}

#[test]
fn groups_still_serve_a_loop_larger_than_memory() {
    // A loop of 40 items (memory holds 16) read four times with idle periods: the
    // groups it forms serve hits, and every hit of the reference is kept.
    let trace: Vec<Read> = (0..4)
        .flat_map(|_| (0..40).map(|k| (1, 7 + 3 * k)))
        .collect();
    let o = against(Policy::Group, &trace, Some(40)).unwrap();
    assert!(o.by_groups > 0, "no group hits: {o:?}");
    assert!(o.hits >= o.ref_hits);
}

#[test]
fn the_protected_share_is_at_least_half_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(Policy::Group);
    let cache: Cache = open_cache(Some(dir.path()), &cfg).unwrap().0;
    assert!(cache.protected_items() as u64 >= cfg.disk / ITEM / 2);
    assert!((cache.protected_items() as u64) < cfg.disk / ITEM);
}

#[test]
fn without_a_share_group_is_lru_and_with_one_it_serves_a_loop() {
    // A loop of 40 items read four times fits the whole store (64 items) but not
    // the item region beside a full share (32): pinned at zero, `group` hits exactly
    // what an LRU of the store hits (every read of the three later passes); pinned at
    // the full share it still hits at least what an LRU of 32 items hits.
    let trace: Vec<Read> = (0..4)
        .flat_map(|_| (0..40).map(|k| (1, 7 + 3 * k)))
        .collect();
    let o = against_with(Policy::Group, Some(0), &trace, Some(40)).unwrap();
    assert_eq!((o.hits, o.ref_hits, o.by_groups), (120, 120, 0));
    let o = against_with(Policy::Group, Some(4), &trace, Some(40)).unwrap();
    assert!(o.hits >= o.ref_hits);
}

/// Reads `trace` (caller 1, idle work every 40 reads) through a fresh `group`
/// cache whose share follows earnings; returns the share's slots and the item
/// region's capacity at the end.
fn share_after(trace: &[u64]) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join("f.bin");
    let data: Vec<u8> = (0..FILE_ITEMS * ITEM).map(|i| (i % 239) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let cache = Arc::new(
        open_cache(Some(dir.path()), &config(Policy::Group))
            .unwrap()
            .0,
    );
    let file = File::open(&path).unwrap();
    let reader = Arc::new(
        DataFile::open_named(&path, &path, SlowStore::new(StoreConfig::instant())).unwrap(),
    );
    let open = cache.open(
        "f.bin",
        &file.metadata().unwrap(),
        file.try_clone().unwrap(),
        reader,
    );
    assert_eq!(cache.state().share.slots(), 4);
    let mut buf = vec![0u8; ITEM as usize];
    for (n, &item) in trace.iter().enumerate() {
        if n > 0 && n % 40 == 0 {
            cache.idle_work();
        }
        open.read_at(&file, item * ITEM, &mut buf, 1).unwrap();
        let at = (item * ITEM) as usize;
        assert_eq!(buf[..], data[at..at + ITEM as usize]);
    }
    drop(open);
    let st = cache.state();
    (st.share.slots(), st.plain.cap())
}

#[test]
fn a_share_that_does_not_pay_shrinks_to_zero() {
    // Random reads over 100 items, a store of 64: groups hardly earn, ghosts and
    // their SOURCE reads cost; the share falls from half the store to at most a
    // slot (at zero, groups get one again after 256 misses to show what they earn),
    // and the item region gets the rest back.
    let mut x = 12345u64;
    let random: Vec<u64> = (0..2000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 100
        })
        .collect();
    let (slots, cap) = share_after(&random);
    assert!(slots <= 1 && cap >= 56, "share {slots}, region {cap}");
}

#[test]
fn groups_serving_what_a_full_store_would_hold_earn_nothing() {
    // A walk of 48 items read ten times fits the store (64) but not the region
    // beside the full share (32). Groups form and serve it, but every item they
    // serve is one a full-size LRU would hold: the share shrinks until the region
    // holds the walk.
    let walk: Vec<u64> = (0..10).flat_map(|_| (0..48).map(|k| 3 + 2 * k)).collect();
    let (slots, cap) = share_after(&walk);
    assert!(cap >= 48, "share {slots}, region {cap}");
}
