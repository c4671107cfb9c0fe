//! Flattening and pricing against brute force: every selected element enumerated,
//! mapped to its byte address, merged — on small arrays of every layout kind
//! (contiguous, chunked with unallocated and reordered chunks read in part or whole into
//! the reader's chunk cache, filtered chunks with stored sizes), for hyperslabs,
//! products of index sets, unions and points.

use patio_layout::{flatten, merge_sorted, Axis, Grid, Layout, Selection};
use patio_storage::Striping;
use proptest::prelude::*;
use std::collections::HashSet;

/// Every element of `g`, row-major.
fn elements(g: &Grid) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for a in &g.axes {
        let idx: Vec<u64> = a.blocks.iter().flat_map(|&(s, n)| s..s + n).collect();
        out = out
            .into_iter()
            .flat_map(|p| {
                idx.iter().map(move |&i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

fn chunk_of(l: &Layout, p: &[u64]) -> (usize, u64) {
    let grid = l.grid();
    let (mut c, mut local) = (0u64, 0u64);
    for j in 0..p.len() {
        c = c * grid[j] + p[j] / l.chunk[j];
        local = local * l.chunk[j] + p[j] % l.chunk[j];
    }
    (c as usize, local)
}

fn reference(l: &Layout, sel: &Selection) -> (Vec<(u64, u64)>, u64) {
    let pts: Vec<Vec<u64>> = match sel {
        Selection::Grids(gs) => gs.iter().flat_map(elements).collect(),
        Selection::Points { rank, coords } => {
            coords.chunks((*rank).max(1)).map(<[u64]>::to_vec).collect()
        }
    };
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut push = |o: u64, n: u64| match out.last_mut() {
        Some(last) if last.0 + last.1 == o => last.1 += n,
        _ => out.push((o, n)),
    };
    // Chunks read whole: filtered ones (stored sizes, decompressed), and unfiltered ones
    // that fit the reader's chunk cache.
    let whole = !l.contiguous && (l.stored.is_some() || l.chunk_bytes() <= l.chunk_cache);
    if whole {
        let mut seen = HashSet::new();
        let mut inflated = 0;
        for p in pts {
            let (c, _) = chunk_of(l, &p);
            if seen.insert(c) {
                if let Some(a) = l.addresses[c] {
                    match &l.stored {
                        Some(stored) => {
                            push(a, stored[c]);
                            inflated += l.chunk_bytes();
                        }
                        None => push(a, l.chunk_bytes()),
                    }
                }
            }
        }
        return (out, inflated);
    }
    for p in pts {
        let (c, local) = chunk_of(l, &p);
        if let Some(a) = l.addresses[c] {
            push(a + local * l.itemsize, l.itemsize);
        }
    }
    (out, 0)
}

fn axis(n: u64) -> impl Strategy<Value = Axis> {
    prop::collection::btree_set(0..n, 1..=n as usize).prop_map(|s| {
        let v: Vec<u64> = s.into_iter().collect();
        Axis::from_sorted_indices(&v).unwrap()
    })
}

fn regular_axis(n: u64) -> impl Strategy<Value = Axis> {
    (0..n, 1..4u64, 1..4u64).prop_flat_map(move |(s, block, extra)| {
        let stride = block + extra - 1;
        let max_count = if s + block > n {
            0
        } else {
            (n - s - block) / stride + 1
        };
        (Just((s, stride, block)), 0..=max_count).prop_map(move |((s, st, b), c)| {
            if c == 0 {
                Axis::regular(0, 1, 1, n.min(1)).unwrap()
            } else {
                Axis::regular(s, st, c, b).unwrap()
            }
        })
    })
}

fn grid(shape: Vec<u64>) -> impl Strategy<Value = Grid> {
    let axes: Vec<BoxedStrategy<Axis>> = shape
        .iter()
        .map(|&n| prop_oneof![axis(n), regular_axis(n)].boxed())
        .collect();
    axes.prop_map(|axes| Grid { axes })
}

fn layout(shape: Vec<u64>) -> impl Strategy<Value = Layout> {
    let d = shape.len();
    let chunk = prop::collection::vec(1..5u64, d);
    (chunk, 0..4u8, 1..9u64, any::<u64>()).prop_map(move |(chunk, kind, itemsize, seed)| {
        if kind == 0 {
            return Layout::contiguous(&shape, itemsize, seed % 1000).unwrap();
        }
        let grid: Vec<u64> = shape
            .iter()
            .zip(&chunk)
            .map(|(&n, &c)| n.div_ceil(c))
            .collect();
        let cells: u64 = grid.iter().product();
        let chunk_bytes: u64 = chunk.iter().product::<u64>() * itemsize;
        // A permutation of slots (chunks written out of grid order), some unallocated.
        let mut slots: Vec<u64> = (0..cells).collect();
        let mut r = seed | 1;
        for i in (1..slots.len()).rev() {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            slots.swap(i, (r % (i as u64 + 1)) as usize);
        }
        let stored: Vec<u64> = (0..cells)
            .map(|i| 1 + (i * 7 + seed) % chunk_bytes)
            .collect();
        let addr: Vec<i64> = slots
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                if (seed >> (i % 60)) & 7 == 0 {
                    -1
                } else {
                    (s * chunk_bytes) as i64
                }
            })
            .collect();
        // 1: unfiltered, read in part (chunks larger than the reader's cache); 2:
        // unfiltered, read whole (HDF5's default cache); 3: filtered.
        let stored = (kind == 3).then_some(stored.as_slice());
        let l = Layout::chunked(&shape, itemsize, &chunk, &addr, stored).unwrap();
        if kind == 1 {
            l.with_chunk_cache(0)
        } else {
            l
        }
    })
}

fn case() -> impl Strategy<Value = (Layout, Selection)> {
    prop::collection::vec(1..7u64, 1..4).prop_flat_map(|shape| {
        let d = shape.len();
        let grids = prop::collection::vec(grid(shape.clone()), 1..3).prop_map(Selection::Grids);
        let points = prop::collection::vec(shape.iter().map(|&n| 0..n).collect::<Vec<_>>(), 0..12)
            .prop_map(move |ps| Selection::Points {
                rank: d,
                coords: ps.into_iter().flatten().collect(),
            });
        (layout(shape), prop_oneof![grids, points])
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn flatten_matches_element_enumeration((l, sel) in case()) {
        let got = flatten(&l, &sel).unwrap();
        let (want, inflated) = reference(&l, &sel);
        prop_assert_eq!(&got.extents, &want);
        prop_assert_eq!(got.inflated, inflated);
        let merged = merge_sorted(&got.extents).unwrap();
        let mut bytes: Vec<u64> = want.iter().flat_map(|&(o, n)| o..o + n).collect();
        bytes.sort_unstable();
        bytes.dedup();
        let covered: Vec<u64> = merged.iter().flat_map(|&(o, n)| o..o + n).collect();
        prop_assert_eq!(covered, bytes);
    }
}

#[test]
fn out_of_range_and_wrong_rank_are_errors() {
    let l = Layout::contiguous(&[4, 4], 8, 0).unwrap();
    let g = Grid::boxed(&[0, 0], &[5, 4]).unwrap();
    assert!(flatten(&l, &Selection::grid(g)).is_err());
    let g = Grid::boxed(&[0], &[2]).unwrap();
    assert!(flatten(&l, &Selection::grid(g)).is_err());
    assert!(Layout::chunked(&[4, 4], 8, &[2, 2], &[0, 1, 2], None).is_err());
    assert!(Layout::chunked(&[4, 4], 8, &[2, 0], &[0], None).is_err());
}

#[test]
fn a_filtered_read_costs_its_stored_chunks_and_their_decompression() {
    // 4 chunks of 2x2 doubles (32 B raw), stored in 10 bytes each.
    let l = Layout::chunked(&[4, 4], 8, &[2, 2], &[0, 10, 20, 30], Some(&[10; 4])).unwrap();
    let one = Selection::grid(Grid::boxed(&[0, 0], &[1, 1]).unwrap());
    let f = flatten(&l, &one).unwrap();
    assert_eq!(f.extents, vec![(0, 10)]);
    assert_eq!(f.inflated, 32);
    let model = Striping::by_name("ssd").unwrap();
    let c = patio_layout::Constants {
        t_pg: 1e-4,
        t_chk: 1e-3,
        t_lat: 1e-2,
        t_dec: 1e-6,
    };
    let t = patio_layout::price(&model, &c, &[&f]).unwrap();
    assert!((t - (1e-4 + 1e-3 + 1e-2 + 32e-6)).abs() < 1e-12, "{t}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Page-granular flattening prices exactly what byte-exact flattening prices.
    #[test]
    fn page_granular_extents_count_the_same_pages((l, sel) in case(), page in 1..64u64, targets in 1..4usize) {
        let model = Striping { targets, stripe_size: page * 3, rpc_size: page * 3, page_size: page, ..Striping::default() };
        let exact = flatten(&l, &sel).unwrap();
        let coarse = patio_layout::flatten_pages(&l, &sel, page).unwrap();
        prop_assert!(coarse.extents.len() <= exact.extents.len());
        prop_assert_eq!(model.page_counts(&exact.extents).unwrap(), model.page_counts(&coarse.extents).unwrap());
    }
}

#[test]
fn an_unfiltered_chunk_that_fits_the_chunk_cache_is_read_whole() {
    // 4 chunks of 2x2 doubles (32 B): HDF5 brings a chunk of at most its cache's size
    // (1 MiB by default) into the cache whole, so one element costs its whole chunk.
    let l = Layout::chunked(&[4, 4], 8, &[2, 2], &[0, 100, 200, 300], None).unwrap();
    let one = Selection::grid(Grid::boxed(&[2, 3], &[3, 4]).unwrap());
    let f = flatten(&l, &one).unwrap();
    assert_eq!((f.extents.clone(), f.inflated), (vec![(300, 32)], 0));
    // With a cache smaller than a chunk it is read in part: the element alone.
    let part = flatten(&l.clone().with_chunk_cache(31), &one).unwrap();
    assert_eq!(part.extents, vec![(300 + 8, 8)]);
    // Contiguous storage has no chunks to cache.
    let c = Layout::contiguous(&[4, 4], 8, 0).unwrap();
    assert_eq!(flatten(&c, &one).unwrap().extents, vec![(11 * 8, 8)]);
}
