//! The decision against an element model: on small arrays whose element at linear index
//! `i` has the value `i`, every candidate's parts — read from byte models of the
//! original and of replicas of every kind — hold exactly the requested elements, and
//! the choice is the cheapest candidate (the original on ties); and every candidate's
//! pieces (copy, source, buffer destination), read and placed, fill the buffer with the
//! request's elements in its order.

use patio_layout::{flatten, Axis, Constants, Decider, Grid, Holds, Layout, Replica, Selection};
use patio_storage::Striping;
use proptest::prelude::*;
use std::collections::BTreeMap;

const ITEM: u64 = 8;

/// A byte model: address -> element value, for an array stored in `layout`, whose
/// element at row-major position `k` of the stored array is `value[k]`.
fn store(layout: &Layout, values: &[u64]) -> BTreeMap<u64, u64> {
    let shape = &layout.shape;
    let all = Selection::grid(Grid::boxed(&vec![0; shape.len()], shape).unwrap());
    let mut addrs = Vec::new();
    for (o, n) in flatten(layout, &all).unwrap().extents {
        addrs.extend((0..n / ITEM).map(|i| o + i * ITEM));
    }
    addrs.into_iter().zip(values.iter().copied()).collect()
}

fn read(mem: &BTreeMap<u64, u64>, layout: &Layout, sel: &Selection) -> Vec<u64> {
    let mut out = Vec::new();
    for (o, n) in flatten(layout, sel).unwrap().extents {
        out.extend((0..n / ITEM).map(|i| mem[&(o + i * ITEM)]));
    }
    out
}

fn elements(shape: &[u64], sel: &Selection) -> Vec<u64> {
    let lin = |p: &[u64]| p.iter().zip(shape).fold(0, |a, (&c, &n)| a * n + c);
    match sel {
        Selection::Points { rank, coords } => coords.chunks(*rank).map(lin).collect(),
        Selection::Grids(gs) => gs
            .iter()
            .flat_map(|g| {
                let mut pts = vec![vec![]];
                for a in &g.axes {
                    let idx: Vec<u64> = a.blocks.iter().flat_map(|&(s, n)| s..s + n).collect();
                    pts = pts
                        .into_iter()
                        .flat_map(|p: Vec<u64>| {
                            idx.iter().map(move |&i| [p.clone(), vec![i]].concat())
                        })
                        .collect();
                }
                pts.into_iter().map(|p| lin(&p)).collect::<Vec<_>>()
            })
            .collect(),
    }
}

fn row_major(shape: &[u64], dims: impl Fn(&[u64]) -> u64) -> Vec<u64> {
    let mut out = Vec::new();
    let n: u64 = shape.iter().product();
    for k in 0..n {
        let mut p = vec![0; shape.len()];
        let mut r = k;
        for j in (0..shape.len()).rev() {
            p[j] = r % shape[j];
            r /= shape[j];
        }
        out.push(dims(&p));
    }
    out
}

fn set(v: &[u64]) -> Axis {
    Axis::from_sorted_indices(v).unwrap()
}

struct Case {
    shape: Vec<u64>,
    decider: Decider,
    mems: Vec<BTreeMap<u64, u64>>,
    layouts: Vec<Layout>,
}

fn case(shape: Vec<u64>, sets: Vec<Vec<u64>>, sets2: Vec<Vec<u64>>, points: Vec<u64>) -> Case {
    let lin = |p: &[u64]| p.iter().zip(&shape).fold(0, |a, (&c, &n)| a * n + c);
    let orig = Layout::chunked(
        &shape,
        ITEM,
        &[2, 3],
        &[
            30_000, 0, 9_000, 3_000, 6_000, 12_000, 15_000, 18_000, 21_000,
        ],
        None,
    )
    .unwrap()
    // Element by element: the memories below map each element's address, so chunks are
    // read in part (no chunk cache) and every extent is exactly the selected elements.
    .with_chunk_cache(0);
    let mut layouts = vec![orig.clone()];
    let mut mems = vec![store(&orig, &row_major(&shape, lin))];
    let mut reps = Vec::new();
    // Transposed.
    let perm = vec![1, 0];
    let tshape: Vec<u64> = perm.iter().map(|&a| shape[a]).collect();
    let t = Layout::contiguous(&tshape, ITEM, 100_000).unwrap();
    mems.push(store(&t, &row_major(&tshape, |q| lin(&[q[1], q[0]]))));
    layouts.push(t.clone());
    reps.push(Replica {
        layout: t,
        holds: Holds::Transposed { perm: perm.clone() },
    });
    // Re-chunked.
    let c = Layout::chunked(
        &shape,
        ITEM,
        &[3, 2],
        &(0..8).map(|i| 200_000 + 48 * (7 - i)).collect::<Vec<_>>(),
        None,
    )
    .unwrap()
    .with_chunk_cache(0);
    mems.push(store(&c, &row_major(&shape, lin)));
    layouts.push(c.clone());
    reps.push(Replica {
        layout: c,
        holds: Holds::Everything,
    });
    // Two concatenated products (the second stored transposed).
    for (s, perm, base) in [(&sets, vec![0, 1], 300_000), (&sets2, vec![1, 0], 400_000)] {
        let pshape: Vec<u64> = perm.iter().map(|&a| s[a].len() as u64).collect();
        let l = Layout::contiguous(&pshape, ITEM, base).unwrap();
        let vals = row_major(&pshape, |q| {
            let mut p = vec![0; 2];
            for (i, &a) in perm.iter().enumerate() {
                p[a] = s[a][q[i] as usize];
            }
            lin(&p)
        });
        mems.push(store(&l, &vals));
        layouts.push(l.clone());
        reps.push(Replica {
            layout: l,
            holds: Holds::Product {
                sets: s.iter().map(|v| set(v)).collect(),
                perm,
            },
        });
    }
    // Concatenated points.
    let l = Layout::contiguous(&[points.len() as u64], ITEM, 500_000).unwrap();
    mems.push(store(&l, &points));
    layouts.push(l.clone());
    reps.push(Replica {
        layout: l,
        holds: Holds::Points { linear: points },
    });
    let model = Striping::by_name("lustre").unwrap();
    let consts = Constants {
        t_pg: 1e-5,
        t_chk: 1e-3,
        t_lat: 1e-4,
        t_dec: 0.0,
    };
    Case {
        shape: shape.clone(),
        decider: Decider::new(orig, reps, model, consts).unwrap(),
        mems,
        layouts,
    }
}

/// The buffer the pieces of a candidate fill (every element exactly once).
fn assemble(c: &Case, sel: &Selection, cand: &patio_layout::Candidate) -> Vec<u64> {
    let p = c.decider.pieces(sel, cand).unwrap();
    let n: u64 = p.buffer.iter().product();
    let mut buf: Vec<Option<u64>> = vec![None; n as usize];
    let strides: Vec<u64> = (0..p.buffer.len())
        .map(|j| p.buffer[j + 1..].iter().product())
        .collect();
    for piece in &p.pieces {
        let at = piece.copy.map_or(0, |i| i + 1);
        let vals = read(&c.mems[at], &c.layouts[at], &piece.source);
        let dest: Vec<u64> = match &piece.dest {
            Selection::Points { rank: 1, coords } => coords.clone(),
            Selection::Grids(gs) => {
                assert_eq!(gs.len(), 1);
                let idx: Vec<Vec<u64>> = gs[0]
                    .axes
                    .iter()
                    .map(|a| a.blocks.iter().flat_map(|&(s, n)| s..s + n).collect())
                    .collect();
                let mut lin = vec![0u64];
                for &j in &piece.order {
                    let st = strides[j];
                    lin = lin
                        .iter()
                        .flat_map(|&l| idx[j].iter().map(move |&i| l + i * st))
                        .collect();
                }
                lin
            }
            other => panic!("destination {other:?}"),
        };
        assert_eq!(vals.len(), dest.len(), "{:?}", cand.plan);
        for (v, d) in vals.into_iter().zip(dest) {
            assert!(buf[d as usize].is_none(), "{:?} fills {d} twice", cand.plan);
            buf[d as usize] = Some(v);
        }
    }
    buf.into_iter()
        .map(|v| v.unwrap_or_else(|| panic!("{:?} leaves a hole", cand.plan)))
        .collect()
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

fn subset(n: u64) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::btree_set(0..n, 1..=n as usize).prop_map(|s| s.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_candidate_reads_exactly_the_selection(
        a0 in subset(5), a1 in subset(7),
        s0 in subset(5), s1 in subset(7), t0 in subset(5), t1 in subset(7),
        pts in prop::collection::btree_set(0..35u64, 1..20),
        qs in prop::collection::vec((0..5u64, 0..7u64), 1..10),
        kind in 0..3u8,
    ) {
        let mut c = case(vec![5, 7], vec![s0, s1], vec![t0, t1], pts.into_iter().collect());
        let grid = Selection::grid(Grid { axes: vec![set(&a0), set(&a1)] });
        let sel = match kind {
            0 => Selection::Points { rank: 2, coords: qs.iter().flat_map(|&(i, j)| [i, j]).collect() },
            // h5py's fancy indexing: a union of boxes, one per row, forming a product.
            1 => Selection::Grids(a0.iter().map(|&i| Grid { axes: vec![set(&[i]), set(&a1)] }).collect()),
            _ => grid.clone(),
        };
        let in_order = if kind == 0 { &sel } else { &grid };
        let want = sorted(elements(&c.shape, in_order));
        let buffer_order = elements(&c.shape, in_order);
        let cands = c.decider.candidates(&sel).unwrap();
        for cand in &cands {
            let mut got = Vec::new();
            for (src, part) in &cand.parts {
                let at = src.map_or(0, |i| i + 1);
                got.extend(read(&c.mems[at], &c.layouts[at], part));
            }
            prop_assert_eq!(sorted(got), want.clone(), "{:?}", cand.plan);
            prop_assert_eq!(assemble(&c, &sel, cand), buffer_order.clone(), "{:?}", cand.plan);
        }
        let (best, saved) = c.decider.choose(&sel).unwrap();
        let cheapest = cands.iter().map(|x| x.seconds).fold(f64::INFINITY, f64::min);
        prop_assert_eq!(best.seconds, cheapest);
        prop_assert!((saved - (cands[0].seconds - cheapest)).abs() < 1e-15);
        if cands[0].seconds == cheapest {
            prop_assert_eq!(best.plan, patio_layout::Plan::Original);
        }
    }
}

#[test]
fn replicas_that_do_not_match_the_array_are_refused() {
    let orig = Layout::contiguous(&[4, 4], 8, 0).unwrap();
    let bad = Replica {
        layout: Layout::contiguous(&[4, 5], 8, 0).unwrap(),
        holds: Holds::Everything,
    };
    let model = Striping::by_name("ssd").unwrap();
    assert!(Decider::new(orig.clone(), vec![bad], model.clone(), Constants::default()).is_err());
    let bad = Replica {
        layout: Layout::contiguous(&[4, 4], 8, 0).unwrap(),
        holds: Holds::Transposed { perm: vec![0, 0] },
    };
    assert!(Decider::new(orig, vec![bad], model, Constants::default()).is_err());
}

/// A 64 x 512 array of doubles (4 KiB rows) with two concatenated row-set replicas (the
/// second stored transposed) and a point replica: big enough for split, combined and
/// point plans to win, so pruning (which skips candidates before pricing their rest)
/// is checked where it matters.
fn rows_case(a: &[u64], b: &[u64], pts: &[u64]) -> Decider {
    sets_case(0, a, b, pts)
}

/// As [`rows_case`], the replicas' index sets along `axis` (0: rows, 1: columns).
fn sets_case(axis: usize, a: &[u64], b: &[u64], pts: &[u64]) -> Decider {
    let orig = Layout::contiguous(&[64, 512], ITEM, 0).unwrap();
    let mut reps = Vec::new();
    for (held, perm, base) in [(a, vec![0, 1], 1u64 << 24), (b, vec![1, 0], 1 << 25)] {
        let all: [Vec<u64>; 2] = [(0..64).collect(), (0..512).collect()];
        let mut sets = vec![set(&all[0]), set(&all[1])];
        sets[axis] = set(held);
        let shape: Vec<u64> = perm.iter().map(|&j| sets[j].len()).collect();
        reps.push(Replica {
            layout: Layout::contiguous(&shape, ITEM, base).unwrap(),
            holds: Holds::Product { sets, perm },
        });
    }
    reps.push(Replica {
        layout: Layout::contiguous(&[pts.len() as u64], ITEM, 1 << 26).unwrap(),
        holds: Holds::Points {
            linear: pts.to_vec(),
        },
    });
    let consts = Constants {
        t_pg: 5e-6,
        t_chk: 1e-4,
        t_lat: 1e-4,
        t_dec: 0.0,
    };
    Decider::new(orig, reps, Striping::by_name("ssd").unwrap(), consts).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn pruning_keeps_the_cheapest_candidate(
        a in subset(64), b in subset(64), rows in subset(64),
        lo in 0..512u64, n in 1..512u64,
        pts in prop::collection::btree_set(0..64 * 512u64, 1..40),
        qs in prop::collection::vec(0..64 * 512u64, 1..30),
        use_points in any::<bool>(),
    ) {
        let pts: Vec<u64> = pts.into_iter().collect();
        let mut d = rows_case(&a, &b, &pts);
        let sel = if use_points {
            // Half the request from the replica's points, half anywhere.
            let coords = qs.iter().enumerate().flat_map(|(i, &q)| {
                let l = if i % 2 == 0 { pts[q as usize % pts.len()] } else { q };
                [l / 512, l % 512]
            }).collect();
            Selection::Points { rank: 2, coords }
        } else {
            let hi = (lo + n).min(512);
            Selection::grid(Grid { axes: vec![set(&rows), Axis { blocks: vec![(lo, hi - lo)] }] })
        };
        let cands = d.candidates(&sel).unwrap();
        let cheapest = cands.iter().map(|x| x.seconds).fold(f64::INFINITY, f64::min);
        let (best, _) = d.choose(&sel).unwrap();
        prop_assert_eq!(best.seconds, cheapest);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Column sets: removing a few columns from a request often leaves its pages as they
    /// were, so splits are pruned without pricing their rest; the choice is unchanged.
    #[test]
    fn pruning_by_unchanged_pages_keeps_the_cheapest_candidate(
        a in prop::collection::btree_set(0..512u64, 1..200),
        b in prop::collection::btree_set(0..512u64, 1..200),
        cols in prop::collection::btree_set(0..512u64, 1..300),
        lo in 0..64u64, n in 1..64u64,
    ) {
        let (a, b): (Vec<u64>, Vec<u64>) = (a.into_iter().collect(), b.into_iter().collect());
        let cols: Vec<u64> = cols.into_iter().collect();
        let mut d = sets_case(1, &a, &b, &[0]);
        let hi = (lo + n).min(64);
        let sel = Selection::grid(Grid { axes: vec![Axis { blocks: vec![(lo, hi - lo)] }, set(&cols)] });
        let cands = d.candidates(&sel).unwrap();
        let cheapest = cands.iter().map(|x| x.seconds).fold(f64::INFINITY, f64::min);
        let (best, _) = d.choose(&sel).unwrap();
        prop_assert_eq!(best.seconds, cheapest);
    }
}

#[test]
fn split_combined_and_point_plans_win_where_they_should() {
    let pts = [5, 1030, 2050, 9000];
    let mut d = rows_case(&[10, 20, 30], &[40, 50, 60], &pts);
    let all = Axis {
        blocks: vec![(0, 512)],
    };
    let rows = |r: &[u64]| {
        Selection::grid(Grid {
            axes: vec![set(r), all.clone()],
        })
    };
    let plan = |d: &mut Decider, s: &Selection| d.choose(s).unwrap().0.plan;
    use patio_layout::Plan;
    assert_eq!(plan(&mut d, &rows(&[10, 20, 30])), Plan::Sub(0));
    assert_eq!(
        plan(&mut d, &rows(&[10, 20, 30, 63])),
        Plan::Split {
            replica: 0,
            axis: 0
        }
    );
    assert_eq!(
        plan(&mut d, &rows(&[10, 20, 30, 40, 50, 60])),
        Plan::Combined {
            replicas: vec![0, 1],
            axis: 0,
            rest: false
        }
    );
    let points = Selection::Points {
        rank: 2,
        coords: vec![17, 296, 0, 5, 4, 2, 2, 6, 60, 500],
    };
    assert_eq!(
        plan(&mut d, &points),
        Plan::Points {
            replica: 2,
            rest: true
        }
    );
}

/// A trajectory `(8 frames, 64 atoms, 3)` of 4-byte items, one frame per chunk, frames
/// not page aligned, on 64-byte pages over two targets, with concatenated replicas of
/// two atom sets and of one coordinate (all frames): box requests whose edges along
/// the atoms or the coordinates those replicas hold are pruned by the bound on the pages
/// an edge removal loses.
fn trajectory_case(a: &[u64], b: &[u64], coord: u64, t_chk: f64) -> Decider {
    let (frames, atoms) = (8u64, 64u64);
    let addr: Vec<i64> = (0..frames)
        .map(|t| (100 + t * (atoms * 12 + 20)) as i64)
        .collect();
    let orig = Layout::chunked(&[frames, atoms, 3], 4, &[1, atoms, 3], &addr, None).unwrap();
    let all = |n: u64| Axis {
        blocks: vec![(0, n)],
    };
    let mut reps = Vec::new();
    let sets = [
        vec![all(frames), set(a), all(3)],
        vec![all(frames), set(b), all(3)],
        vec![all(frames), all(atoms), set(&[coord])],
    ];
    for (i, sets) in sets.into_iter().enumerate() {
        let shape: Vec<u64> = sets.iter().map(Axis::len).collect();
        reps.push(Replica {
            layout: Layout::contiguous(&shape, 4, (i as u64 + 1) << 24).unwrap(),
            holds: Holds::Product {
                sets,
                perm: vec![0, 1, 2],
            },
        });
    }
    let model = Striping {
        targets: 2,
        stripe_size: 128,
        page_size: 64,
        ..Striping::hdd()
    };
    let consts = Constants {
        t_pg: 64.0 / 150e6,
        t_chk,
        t_lat: 1e-4,
        t_dec: 0.0,
    };
    Decider::new(orig, reps, model, consts).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Box requests on the trajectory: the pruned choice is the cheapest candidate.
    #[test]
    fn pruning_edge_removals_keeps_the_cheapest_candidate(
        a in prop::collection::btree_set(0..64u64, 1..30),
        b in prop::collection::btree_set(0..64u64, 1..30),
        coord in 0..3u64,
        f0 in 0..8u64, nf in 1..8u64,
        a0 in 0..64u64, na in 1..64u64,
        c0 in 0..3u64, nc in 1..3u64,
        t_chk in prop::sample::select(vec![1e-5, 1e-4, 4e-3]),
    ) {
        let (a, b): (Vec<u64>, Vec<u64>) = (a.into_iter().collect(), b.into_iter().collect());
        let mut d = trajectory_case(&a, &b, coord, t_chk);
        let lo = [f0, a0, c0];
        let hi = [(f0 + nf).min(8), (a0 + na).min(64), (c0 + nc).min(3)];
        let sel = Selection::grid(Grid::boxed(&lo, &hi).unwrap());
        let cands = d.candidates(&sel).unwrap();
        let cheapest = cands.iter().map(|x| x.seconds).fold(f64::INFINITY, f64::min);
        let (best, _) = d.choose(&sel).unwrap();
        prop_assert_eq!(best.seconds, cheapest);
    }
}
