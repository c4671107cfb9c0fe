//! Synthetic inputs of the benchmarks: extent lists for `bench lookup` and
//! `bench detect`, and per-writer write streams for `bench compress`, each modelled
//! on a figure of the papers in /work/shared/papers. Everything is deterministic: the
//! random parts draw from a `SmallRng` seeded with [`super::SEED`].
//!
//! Conventions: an [`Extent`] is `(logical, length, physical, chunk)`. In the lookup
//! inputs the data is "packed": the i-th input extent lives at physical `i × 4096`
//! of chunk 0. In the write workloads every writer (rank) appends to its own log, so
//! `physical` is the writer's log position at the time of the write and `chunk` is
//! the rank (the PLFS container layout).

use patio_core::Extent;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Block size of the lookup inputs.
const BLOCK: u64 = 4096;

/// A named extent list for `bench lookup` / `bench detect`.
pub struct LookupInput {
    pub name: &'static str,
    /// Extents in input (write) order.
    pub extents: Vec<Extent>,
}

/// The four inputs of `bench lookup` and `bench detect`, `n` extents each.
pub fn lookup_inputs(n: usize) -> Vec<LookupInput> {
    vec![
        LookupInput {
            name: "1d-strided",
            extents: strided_1d(n),
        },
        LookupInput {
            name: "2d-strided",
            extents: strided_2d(n),
        },
        LookupInput {
            name: "3d-subarray",
            extents: subarray_3d(n),
        },
        LookupInput {
            name: "repeating-deltas",
            extents: repeating_deltas(n),
        },
        LookupInput {
            name: "random",
            extents: random_blocks(n),
        },
    ]
}

fn packed(logical: impl Iterator<Item = u64>) -> Vec<Extent> {
    logical
        .enumerate()
        .map(|(i, x)| Extent::new(x, BLOCK, i as u64 * BLOCK, 0))
        .collect()
}

/// 1-D strided read reorganised into one file: extent `i` is 4 KiB at logical
/// `i × 8192`, packed at physical `i × 4096`. This is the remap table of the
/// file-reorganization slides ("1-D Strided Remapping Table Performance, 1,000,000
/// accesses": 1-to-1 table 64 MB / 0.78 s build / 0.49 s per 10^6 lookups against a
/// 28-byte I/O signature).
pub fn strided_1d(n: usize) -> Vec<Extent> {
    packed((0..n as u64).map(|i| i * 2 * BLOCK))
}

/// Columns per row of the 2-D input.
const ROW_LEN: u64 = 64;
/// Distance between two columns of a row.
const COL_STRIDE: u64 = 16 * 1024;
/// Distance between two rows (a 4 MiB row of the whole array; only a 64-column
/// sub-array of it is read).
const ROW_STRIDE: u64 = ROW_LEN * COL_STRIDE * 4;

/// 2-D strided sub-array read: rows of 64 elements of 4 KiB, columns 16 KiB apart,
/// rows 4 MiB apart, packed contiguously. The 2-D analogue of the slides' remap
/// table (the slides' reorganisation targets "a recurring non-contiguous pattern";
/// a sub-array of a row-major array is the commonest one).
pub fn strided_2d(n: usize) -> Vec<Extent> {
    packed((0..n as u64).map(|i| (i / ROW_LEN) * ROW_STRIDE + (i % ROW_LEN) * COL_STRIDE))
}

/// Side of the 3-D input's sub-block (elements of 4 KiB).
const CUBE: u64 = 32;

/// kd-strided (3-D) read: every other 4 KiB element of a `32 × 32 × …` sub-block of
/// a row-major array 8× as wide in each of the two inner dimensions (element, row and
/// plane strides all differ), packed contiguously. The nested pattern of the slides'
/// kd-strided signatures.
pub fn subarray_3d(n: usize) -> Vec<Extent> {
    let (row, plane) = (8 * CUBE * BLOCK, 64 * CUBE * CUBE * BLOCK);
    packed((0..n as u64).map(|i| {
        let (z, rest) = (i / (CUBE * CUBE), i % (CUBE * CUBE));
        z * plane + (rest / CUBE) * row + (rest % CUBE) * 2 * BLOCK
    }))
}

/// Offsets following the delta vector `(3, 4, 7) × 4096` repeated: `[0, (3,4,7)^r]`
/// scaled to 4 KiB blocks, the example pattern unit of Figure 8 of the pattern-PLFS
/// paper (io-acceleration-with-pattern-detection), 4 KiB each, packed. A pattern
/// that is regular but not a single stride.
pub fn repeating_deltas(n: usize) -> Vec<Extent> {
    const DELTAS: [u64; 3] = [3, 4, 7];
    packed((0..n).scan(0u64, |x, i| {
        let here = *x;
        *x += DELTAS[i % 3] * BLOCK;
        Some(here)
    }))
}

/// `n` distinct 4 KiB-aligned offsets drawn uniformly from a space of `4n` blocks,
/// presented in shuffled order (so both structures pay for sorting) and packed in
/// that order (physical `i × 4096` for the i-th extent given, a log). The
/// no-structure worst case: nothing in the papers compresses it, and the extent
/// table is the right structure for it.
pub fn random_blocks(n: usize) -> Vec<Extent> {
    let mut rng = SmallRng::seed_from_u64(super::SEED);
    let mut blocks: Vec<u64> = rand::seq::index::sample(&mut rng, 4 * n.max(1), n)
        .into_iter()
        .map(|b| b as u64)
        .collect();
    blocks.sort_unstable();
    blocks.shuffle(&mut rng);
    packed(blocks.into_iter().map(|b| b * BLOCK))
}

/// A write workload of `bench compress`: one write stream per writer.
pub struct WriteWorkload {
    pub name: &'static str,
    /// What the paper reports for the application this models (text, for the table).
    pub paper: &'static str,
    /// Per-writer index entries in write order: `chunk` = rank, `physical` = position
    /// in that writer's log.
    pub writers: Vec<Vec<Extent>>,
}

impl WriteWorkload {
    /// Number of raw index entries (one per write).
    pub fn entries(&self) -> usize {
        self.writers.iter().map(Vec::len).sum()
    }

    /// All writes in an approximate global time order: the writers' streams
    /// interleaved round-robin (SPMD ranks writing in lock step). Later writes win
    /// where they overlap.
    pub fn global_order(&self) -> Vec<Extent> {
        let longest = self.writers.iter().map(Vec::len).max().unwrap_or(0);
        let mut out = Vec::with_capacity(self.entries());
        for i in 0..longest {
            out.extend(self.writers.iter().filter_map(|w| w.get(i)));
        }
        out
    }
}

/// One writer's log: appends writes at its current log position.
struct Log {
    rank: u64,
    pos: u64,
    extents: Vec<Extent>,
}

impl Log {
    fn new(rank: u64) -> Self {
        Log {
            rank,
            pos: 0,
            extents: Vec::new(),
        }
    }

    fn write(&mut self, logical: u64, length: u64) {
        self.extents
            .push(Extent::new(logical, length, self.pos, self.rank));
        self.pos += length;
    }
}

fn logs(writers: u64) -> Vec<Log> {
    (0..writers).map(Log::new).collect()
}

fn finish(logs: Vec<Log>) -> Vec<Vec<Extent>> {
    logs.into_iter().map(|l| l.extents).collect()
}

/// The workloads of `bench compress`, in the order of Figure 1 of the pattern-PLFS
/// papers followed by the real applications of their section 3.2 / V.C.
pub fn write_workloads() -> Vec<WriteWorkload> {
    vec![
        fs_test_n1_strided(),
        nersc_pattern_io(),
        btio(),
        lanl_app(),
        milc_a(),
        milc_b(),
        milc_c(),
        pagoda(),
        flash_random(),
    ]
}

/// FS-TEST N-1 strided checkpoint (Figure 1; the FS-TEST experiments of section 3.1,
/// Figures 13–15, write 4 KiB blocks "stridely"): 64 processes each write 4096
/// blocks of 4 KiB, write `i` of rank `r` at logical `(i·64 + r) × 4096`. Locally one
/// stride per writer, globally one pattern: the whole file is contiguous with the
/// chunk id cycling `0…63`.
pub fn fs_test_n1_strided() -> WriteWorkload {
    const P: u64 = 64;
    const W: u64 = 4096;
    const B: u64 = 4096;
    let mut logs = logs(P);
    for i in 0..W {
        for log in logs.iter_mut() {
            log.write((i * P + log.rank) * B, B);
        }
    }
    WriteWorkload {
        name: "fs-test-n1-strided",
        paper: "orders of magnitude (Fig. 1, FS-TEST)",
        writers: finish(logs),
    }
}

/// NERSC pattern I/O (Figure 1; "each process writes with a single fixed-stride
/// pattern … represented as one global pattern"): rank 0 first writes a 4 KiB file
/// header, then 128 processes each write 2048 records of 48 KiB, record `i` of rank
/// `r` at `4096 + (i·128 + r) × 48 KiB`.
pub fn nersc_pattern_io() -> WriteWorkload {
    const P: u64 = 128;
    const W: u64 = 2048;
    const REC: u64 = 48 * 1024;
    const HEADER: u64 = 4096;
    let mut logs = logs(P);
    logs[0].write(0, HEADER);
    for i in 0..W {
        for log in logs.iter_mut() {
            log.write(HEADER + (i * P + log.rank) * REC, REC);
        }
    }
    WriteWorkload {
        name: "nersc-pattern-io",
        paper: "orders of magnitude (Fig. 1)",
        writers: finish(logs),
    }
}

/// BTIO (NAS BT-IO, Figure 1; "each BTIO process writes with a 2-d strided pattern
/// and they are combined to a single global pattern"): a 64³ grid of 40-byte cells
/// (5 doubles) dumped 10 times, appended one dump after another. 16 processes in a
/// 4×4 grid over (x, y) each own a 16×16 column of all 64 z-planes and write, for
/// every plane and every one of their rows, one 640-byte run of 16 cells. Locally:
/// 16 rows 2560 B apart, 64 planes 160 KiB apart, 10 dumps — a 3-level nest.
pub fn btio() -> WriteWorkload {
    const N: u64 = 64;
    const CELL: u64 = 40;
    const PX: u64 = 4;
    const PY: u64 = 4;
    const DUMPS: u64 = 10;
    let (nx, ny) = (N / PX, N / PY);
    let mut logs = logs(PX * PY);
    for dump in 0..DUMPS {
        for z in 0..N {
            for y in 0..ny {
                for log in logs.iter_mut() {
                    let (bx, by) = (log.rank % PX, log.rank / PX);
                    let cell = (z * N + by * ny + y) * N + bx * nx;
                    log.write(dump * N * N * N * CELL + cell * CELL, nx * CELL);
                }
            }
        }
    }
    WriteWorkload {
        name: "btio",
        paper: "orders of magnitude (Fig. 1)",
        writers: finish(logs),
    }
}

/// LANL App 3-like (Figure 1; "each process of LANL App 3 writes with a 2-D strided
/// pattern. Pattern PLFS was able to represent them by one single pattern entry"):
/// 64 processes write 16 variables; each variable is a section of the file where
/// the ranks' 1 KiB blocks interleave N-1 strided (block `j` of rank `r` at
/// `(j·64 + r) × 1 KiB`, 256 blocks per rank), and sections are separated by a
/// 64 KiB metadata gap. Locally: stride 64 KiB × 256, then a section jump, 16 times.
pub fn lanl_app() -> WriteWorkload {
    const P: u64 = 64;
    const VARS: u64 = 16;
    const J: u64 = 256;
    const L: u64 = 1024;
    const GAP: u64 = 64 * 1024;
    const SECTION: u64 = P * J * L + GAP;
    let mut logs = logs(P);
    for v in 0..VARS {
        for j in 0..J {
            for log in logs.iter_mut() {
                log.write(v * SECTION + (j * P + log.rank) * L, L);
            }
        }
    }
    WriteWorkload {
        name: "lanl-app",
        paper: "orders of magnitude (Fig. 1, LANL App 3)",
        writers: finish(logs),
    }
}

/// MILC lattice geometry: a 16⁴ lattice of 288-byte sites (4 SU(3) links of 18
/// floats) on 2×2×2×2 = 16 ranks with 8⁴ sublattices; the file is in lexicographic
/// site order (x fastest).
const MILC_L: u64 = 16;
const MILC_SUB: u64 = 8;
const MILC_SITE: u64 = 288;
const MILC_RANKS: u64 = 16;

fn milc_site_index(x: u64, y: u64, z: u64, t: u64) -> u64 {
    ((t * MILC_L + z) * MILC_L + y) * MILC_L + x
}

/// MILC configuration A (Figure 16 A, compression 37.0: "each MILC process writes
/// small fix-size pieces of data with a 2-d strided pattern (stride sizes vary)"):
/// each rank writes its sites one 288-byte site at a time in MILC's internal
/// even-then-odd (checkerboard) site order. Within a row the even sites are two
/// sites apart and the row start alternates with the parity of `y+z+t`, so the
/// strides vary from row to row; regular nonetheless (per-rank 4096 writes).
pub fn milc_a() -> WriteWorkload {
    let mut logs = logs(MILC_RANKS);
    for log in logs.iter_mut() {
        let r = log.rank;
        let origin = [(r & 1), (r >> 1) & 1, (r >> 2) & 1, (r >> 3) & 1].map(|b| b * MILC_SUB);
        for parity in 0..2 {
            for t in 0..MILC_SUB {
                for z in 0..MILC_SUB {
                    for y in 0..MILC_SUB {
                        for x in 0..MILC_SUB {
                            let g = [origin[0] + x, origin[1] + y, origin[2] + z, origin[3] + t];
                            if (g.iter().sum::<u64>()) % 2 == parity {
                                log.write(
                                    milc_site_index(g[0], g[1], g[2], g[3]) * MILC_SITE,
                                    MILC_SITE,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    WriteWorkload {
        name: "milc-a",
        paper: "37.0 (Fig. 16 A)",
        writers: finish(logs),
    }
}

/// Writes one rank's contiguous portion `[base, base + len)` as buffers of
/// `min..=max` sites each, the buffers issued in an order permuted inside windows
/// of `window` consecutive buffers (asynchronous flushes completing out of order).
fn milc_portion(
    log: &mut Log,
    rng: &mut SmallRng,
    base: u64,
    len: u64,
    sites: (u64, u64),
    window: usize,
) {
    let mut buffers = Vec::new();
    let mut at = base;
    while at < base + len {
        let size = (rng.gen_range(sites.0..=sites.1) * MILC_SITE).min(base + len - at);
        buffers.push((at, size));
        at += size;
    }
    for group in buffers.chunks_mut(window) {
        group.shuffle(rng);
        for &(x, size) in group.iter() {
            log.write(x, size);
        }
    }
}

/// MILC configuration B (Figure 16 B, compression 3.0: "each process writes to one
/// contiguous portion of the file"): rank `r` owns sites `[r·4096, (r+1)·4096)` of
/// the file and writes them as buffers of 1–16 sites (random sizes, as the message
/// buffers of a gather), with pairs of consecutive buffers completing in random
/// order. Buffers that land in order merge into one extent; the rest leave an
/// irregular index (random lengths and physical jumps).
pub fn milc_b() -> WriteWorkload {
    let mut rng = SmallRng::seed_from_u64(super::SEED ^ 0xb);
    let portion = MILC_SUB.pow(4) * MILC_SITE;
    let mut logs = logs(MILC_RANKS);
    for log in logs.iter_mut() {
        let base = log.rank * portion;
        milc_portion(log, &mut rng, base, portion, (1, 16), 2);
    }
    WriteWorkload {
        name: "milc-b",
        paper: "3.0 (Fig. 16 B)",
        writers: finish(logs),
    }
}

/// MILC configuration C (Figure 16 C, compression 3.6: as B, "each process also
/// writes a header at the beginning of the file"): every rank first writes the same
/// 1 KiB header at offset 0 (overlapping writes; the last one wins in the global
/// index), then its portion after the header as in B but more irregular: buffers
/// of 1–64 sites, issued in random order within windows of 4.
pub fn milc_c() -> WriteWorkload {
    const HEADER: u64 = 1024;
    let mut rng = SmallRng::seed_from_u64(super::SEED ^ 0xc);
    let portion = MILC_SUB.pow(4) * MILC_SITE;
    let mut logs = logs(MILC_RANKS);
    for log in logs.iter_mut() {
        log.write(0, HEADER);
        let base = HEADER + log.rank * portion;
        milc_portion(log, &mut rng, base, portion, (1, 64), 4);
    }
    WriteWorkload {
        name: "milc-c",
        paper: "3.6 (Fig. 16 C)",
        writers: finish(logs),
    }
}

/// Pagoda (GCRM analysis, section 3.2.2, compression 2.9; Figure 20 shows "patterns
/// of varying strides"): 64 processes write 512 variables one after another; variable
/// `v` has records of `4 KiB × (1 + v mod 5)` and each rank writes 2–7 of them
/// (drawn per variable) N-1 strided (record `j` of rank `r` at
/// `base_v + (j·64 + r) × size_v`). Each rank's stream is short strided runs whose
/// stride changes every few requests.
pub fn pagoda() -> WriteWorkload {
    const P: u64 = 64;
    const VARS: u64 = 512;
    let mut rng = SmallRng::seed_from_u64(super::SEED ^ 0x9a);
    let mut logs = logs(P);
    let mut base = 0u64;
    for v in 0..VARS {
        let size = 4096 * (1 + v % 5);
        let records: u64 = rng.gen_range(2..=7);
        for j in 0..records {
            for log in logs.iter_mut() {
                log.write(base + (j * P + log.rank) * size, size);
            }
        }
        base += records * P * size;
    }
    WriteWorkload {
        name: "pagoda",
        paper: "2.9 (sec. 3.2.2)",
        writers: finish(logs),
    }
}

/// FLASH checkpoint, random-ish (Figure 1; "most of FLASH writes are random, which
/// makes it hard to compress"): 8192 AMR blocks of 4 KiB per variable, each block
/// owned by a random one of 64 ranks (load balancing after refinement); for each of
/// 16 variables every rank writes its blocks in its own tree-traversal order (a
/// fixed random permutation) at `var_base + block × 4096`.
pub fn flash_random() -> WriteWorkload {
    const P: u64 = 64;
    const BLOCKS: u64 = 8192;
    const VARS: u64 = 16;
    const BLK: u64 = 4096;
    let mut rng = SmallRng::seed_from_u64(super::SEED ^ 0xf1a5);
    let mut owned: Vec<Vec<u64>> = vec![Vec::new(); P as usize];
    for b in 0..BLOCKS {
        owned[rng.gen_range(0..P) as usize].push(b);
    }
    for list in owned.iter_mut() {
        list.shuffle(&mut rng);
    }
    let mut logs = logs(P);
    for v in 0..VARS {
        for (log, list) in logs.iter_mut().zip(&owned) {
            for &b in list {
                log.write((v * BLOCKS + b) * BLK, BLK);
            }
        }
    }
    WriteWorkload {
        name: "flash-random",
        paper: "hard to compress (Fig. 1, random)",
        writers: finish(logs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_inputs_have_n_distinct_extents() {
        for input in lookup_inputs(1000) {
            assert_eq!(input.extents.len(), 1000, "{}", input.name);
            let mut starts: Vec<u64> = input.extents.iter().map(|e| e.logical).collect();
            starts.sort_unstable();
            starts.dedup();
            assert_eq!(starts.len(), 1000, "{}", input.name);
        }
        let r = repeating_deltas(5);
        let xs: Vec<u64> = r.iter().map(|e| e.logical / BLOCK).collect();
        assert_eq!(xs, [0, 3, 7, 14, 17]);
    }

    #[test]
    fn write_workloads_use_rank_logs() {
        for w in write_workloads() {
            for (rank, writer) in w.writers.iter().enumerate() {
                let mut pos = 0;
                for e in writer {
                    assert_eq!((e.chunk, e.physical), (rank as u64, pos), "{}", w.name);
                    pos += e.length;
                }
            }
            assert_eq!(w.global_order().len(), w.entries());
        }
    }
}
