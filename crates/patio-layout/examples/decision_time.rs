//! Times the layout core's decision for a selection never seen, on the molecular-
//! dynamics case of `patio bench layout --kernel overhead`: positions
//! `(200 frames, 20,000 atoms, 3)` float32 chunked one frame per chunk, with eleven
//! concatenated replicas of the patterns an analysis run records (eight sorted atom
//! selections of a tenth of the atoms, a quarter of the atoms' x coordinate, every
//! other frame of the second half, one atom). Prints the median microseconds per
//! decision for a box, a strided slab, a 2,000-atom fancy index and 10^4 points.
//!
//! `cargo run --release -p patio-layout --example decision_time [-- ROUNDS [NAME [N]]]`
//! (NAME: only the selections whose name contains it; N: only the first N replicas)

use patio_layout::{Axis, Constants, Decider, Grid, Holds, Layout, Replica, Selection};
use patio_storage::Striping;
use std::time::Instant;

const FRAMES: u64 = 200;
const ATOMS: u64 = 20_000;

/// A deterministic stream of pseudo-random numbers (splitmix64).
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `k` distinct sorted values below `n`.
    fn sorted(&mut self, n: u64, k: usize) -> Vec<u64> {
        let mut set = std::collections::BTreeSet::new();
        while set.len() < k {
            set.insert(self.next() % n);
        }
        set.into_iter().collect()
    }
}

fn all(n: u64) -> Axis {
    Axis::regular(0, 1, n, 1).unwrap()
}

fn product_replica(sets: Vec<Axis>, base: &mut u64) -> Replica {
    let shape: Vec<u64> = sets.iter().map(Axis::len).collect();
    let layout = Layout::contiguous(&shape, 4, *base).unwrap();
    *base += shape.iter().product::<u64>() * 4;
    Replica {
        layout,
        holds: Holds::Product {
            sets,
            perm: vec![0, 1, 2],
        },
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(9, |a| a.parse().expect("ROUNDS is a count"));
    let frame = ATOMS * 3 * 4;
    let addresses: Vec<i64> = (0..FRAMES).map(|t| (4096 + t * frame) as i64).collect();
    let original = Layout::chunked(&[FRAMES, ATOMS, 3], 4, &[1, ATOMS, 3], &addresses, None)
        .expect("the trajectory's layout");
    let mut draw = Draw(1);
    let mut base = 1 << 32;
    let mut replicas = Vec::new();
    for _ in 0..8 {
        let atoms = Axis::from_sorted_indices(&draw.sorted(ATOMS, 2_000)).unwrap();
        replicas.push(product_replica(vec![all(FRAMES), atoms, all(3)], &mut base));
    }
    replicas.push(product_replica(
        vec![
            all(FRAMES),
            all(ATOMS / 4),
            Axis::regular(0, 1, 1, 1).unwrap(),
        ],
        &mut base,
    ));
    replicas.push(product_replica(
        vec![
            Axis::regular(FRAMES / 2, 2, FRAMES / 4, 1).unwrap(),
            all(ATOMS),
            all(3),
        ],
        &mut base,
    ));
    let one = draw.next() % ATOMS;
    replicas.push(product_replica(
        vec![all(FRAMES), Axis::regular(one, 1, 1, 1).unwrap(), all(3)],
        &mut base,
    ));
    let consts = Constants {
        t_pg: 4096.0 / 150e6,
        t_chk: 4e-3,
        t_lat: 1e-4,
        t_dec: 0.0,
    };
    let fancy = Axis::from_sorted_indices(&draw.sorted(ATOMS, 2_000)).unwrap();
    let points: Vec<u64> = {
        let n = FRAMES * ATOMS * 3;
        draw.sorted(n, 10_000)
            .into_iter()
            .flat_map(|l| [l / (ATOMS * 3), (l / 3) % ATOMS, l % 3])
            .collect()
    };
    let shapes: Vec<(&str, Selection)> = vec![
        (
            "box",
            Selection::grid(Grid::boxed(&[10, 100, 0], &[20, 600, 3]).unwrap()),
        ),
        (
            "strided slab",
            Selection::grid(Grid {
                axes: vec![
                    Axis::regular(0, 4, FRAMES / 4, 1).unwrap(),
                    Axis::regular(0, 7, ATOMS.div_ceil(7), 1).unwrap(),
                    Axis::regular(0, 1, 1, 1).unwrap(),
                ],
            }),
        ),
        (
            "fancy index",
            Selection::grid(Grid {
                axes: vec![all(FRAMES), fancy, all(3)],
            }),
        ),
        (
            "points 10^4",
            Selection::Points {
                rank: 3,
                coords: points,
            },
        ),
    ];
    println!("{:<14} {:>8} {:>12}", "selection", "blocks", "first us");
    let only = std::env::args().nth(2).unwrap_or_default();
    if let Some(n) = std::env::args().nth(3) {
        replicas.truncate(n.parse().expect("N is a count"));
    }
    for (name, sel) in shapes.iter().filter(|s| s.0.contains(&only)) {
        let mut times = Vec::new();
        let mut d = Decider::new(original.clone(), replicas.clone(), Striping::hdd(), consts)
            .expect("the replicas match the array");
        for _ in 0..rounds {
            // Forgotten decisions: each round decides the selection anew.
            d.forget();
            let t0 = Instant::now();
            let (c, _) = d.choose(sel).unwrap();
            times.push(t0.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(c);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{:<14} {:>8} {:>12.0}",
            name,
            sel.nblocks(),
            times[times.len() / 2]
        );
    }
}
