//! The client workloads of `patio bench cache`: per view, the requests of each client
//! (offset, length in the SOURCE file), and how many items of the cache they touch
//! (the working set the cache-size sweep scales against).
//!
//! * `zoom` — noncontig-like: each client reads `elmtcount` pieces of `veclen`
//!   bytes spread over the file, `veclen × elmtcount` fixed, veclen 4 KiB → 256 KiB;
//! * `tile` — mpi-tile-io-like: a 2 × 2 grid of tiles of a row-major 2-D array of
//!   `rows` rows of 128 KiB, tiles overlapping their neighbours by 0, 25 and 50 %;
//! * `ior` — IOR-like: each client reads its share of a region in transfer-size
//!   requests through a file view that changes every pass (segmented, then
//!   interleaved across clients, …);
//! * `rand` — the control: each client reads 16 KiB at random offsets of a 32 MiB
//!   region, new offsets every pass (nothing to learn; only re-use can hit).

use patio_prefetch::rng::Rng;
use std::collections::HashSet;

/// One request: offset and length in the SOURCE file.
pub type Req = (u64, u64);

/// A workload: views, each a list of requests per client; each view read `passes`
/// times.
pub struct Workload {
    pub name: &'static str,
    pub views: Vec<Vec<Vec<Req>>>,
    pub passes: usize,
}

pub const NAMES: [&str; 4] = ["zoom", "tile", "ior", "rand"];

impl Workload {
    /// Bytes of the distinct `item`-aligned extents the workload reads.
    pub fn working_set(&self, item: u64) -> u64 {
        let mut seen = HashSet::new();
        for view in &self.views {
            for client in view {
                for &(off, len) in client {
                    if len > 0 {
                        seen.extend(off / item..=(off + len - 1) / item);
                    }
                }
            }
        }
        seen.len() as u64 * item
    }

    /// Bytes the clients read over the whole run.
    pub fn client_bytes(&self) -> u64 {
        let per_pass: u64 = self
            .views
            .iter()
            .flatten()
            .flatten()
            .map(|&(_, len)| len)
            .sum();
        per_pass * self.passes as u64
    }
}

/// The workload called `name` over a SOURCE file of `file` bytes.
pub fn by_name(
    name: &str,
    file: u64,
    clients: usize,
    passes: usize,
    tile_rows: u64,
) -> Option<Workload> {
    Some(match name {
        "zoom" => zoom(file, clients, passes),
        "tile" => tile(clients, passes, tile_rows),
        "ior" => ior(file, clients, passes),
        "rand" => rand(file, clients, passes),
        _ => return None,
    })
}

pub fn zoom(file: u64, clients: usize, passes: usize) -> Workload {
    let product = 512 << 10; // veclen × elmtcount per client
    let views = [4u64 << 10, 16 << 10, 64 << 10, 256 << 10]
        .iter()
        .map(|&veclen| {
            let count = product / veclen;
            let pieces = count * clients as u64;
            let spacing = (file / pieces) / 4096 * 4096;
            (0..clients)
                .map(|c| {
                    (0..count)
                        .map(|i| ((i * clients as u64 + c as u64) * spacing, veclen))
                        .collect()
                })
                .collect()
        })
        .collect();
    Workload {
        name: "zoom",
        views,
        passes,
    }
}

pub fn tile(clients: usize, passes: usize, rows: u64) -> Workload {
    // A row-major 2-D array of `rows` rows of 128 KiB; a 2 × 2 grid of tiles.
    let row_bytes = 128u64 << 10;
    let views = [0u64, 25, 50]
        .iter()
        .map(|&overlap| {
            let (th, tw) = (rows / 2, row_bytes / 2);
            let (oh, ow) = (th * overlap / 100, tw * overlap / 100 / 4096 * 4096);
            (0..clients)
                .map(|c| {
                    let (ty, tx) = ((c / 2 % 2) as u64, (c % 2) as u64);
                    let y0 = (ty * th).saturating_sub(ty * oh);
                    let x0 = (tx * tw).saturating_sub(tx * ow);
                    let (h, w) = (th + oh, tw + ow);
                    (y0..(y0 + h).min(rows))
                        .map(|y| (y * row_bytes + x0, w.min(row_bytes - x0)))
                        .collect()
                })
                .collect()
        })
        .collect();
    Workload {
        name: "tile",
        views,
        passes,
    }
}

/// One view per pass (the view changes during the run), each read once.
pub fn ior(file: u64, clients: usize, passes: usize) -> Workload {
    let (transfer, region) = (64u64 << 10, 32u64 << 20);
    let base = file / 2 / 4096 * 4096;
    let per = region / clients as u64 / transfer;
    let segmented: Vec<Vec<Req>> = (0..clients as u64)
        .map(|c| {
            (0..per)
                .map(|i| (base + (c * per + i) * transfer, transfer))
                .collect()
        })
        .collect();
    let interleaved: Vec<Vec<Req>> = (0..clients as u64)
        .map(|c| {
            (0..per)
                .map(|i| (base + (i * clients as u64 + c) * transfer, transfer))
                .collect()
        })
        .collect();
    let views = (0..passes * 2)
        .map(|p| {
            if p % 2 == 0 {
                segmented.clone()
            } else {
                interleaved.clone()
            }
        })
        .collect();
    Workload {
        name: "ior",
        views,
        passes: 1,
    }
}

/// One fresh random draw per pass, each read once.
pub fn rand(file: u64, clients: usize, passes: usize) -> Workload {
    let (len, region, count) = (16u64 << 10, 32u64 << 20, 256u64);
    let base = file / 4 / 4096 * 4096;
    let views = (0..passes * 2)
        .map(|p| {
            let mut rng = Rng::new(super::super::SEED ^ (p as u64 + 1));
            (0..clients)
                .map(|_| {
                    (0..count)
                        .map(|_| (base + rng.below((region - len) / 4096) * 4096, len))
                        .collect()
                })
                .collect()
        })
        .collect();
    Workload {
        name: "rand",
        views,
        passes: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_count_distinct_items() {
        // 2 × 2 tiles without overlap cover the array once: every 64 KiB item.
        let t = tile(4, 3, 64);
        assert_eq!(t.working_set(64 << 10), 64 * (128 << 10));
        let z = zoom(400 << 20, 4, 3);
        // veclen 4 KiB: 512 pieces in 512 distinct items, more for the other views.
        assert!(z.working_set(64 << 10) > 512 * (64 << 10));
        assert!(z.working_set(64 << 10) < 400 << 20);
        let r = rand(400 << 20, 4, 3);
        assert!(r.working_set(64 << 10) <= (32 << 20) + (64 << 10));
        assert_eq!(r.client_bytes(), 6 * 4 * 256 * (16 << 10));
    }
}
