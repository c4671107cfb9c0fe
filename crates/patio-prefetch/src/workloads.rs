//! Synthetic read workloads of `patio bench prefetch`: each is the read stream of one
//! process of a parallel program, as a request list and the size of the data file it
//! reads.
//!
//! The `seed` picks the process (rank) and every random choice of the run; the data
//! set's own layout (Pagoda's records per variable, the correlation groups) is fixed,
//! as it would be for two runs over the same file. So a model trained on a run with
//! another seed (the Markov baseline) has seen the same file read by another process.
//!
//! | name | stream |
//! |---|---|
//! | `contiguous` | rank `r` of 4 reads its segment in 32 KiB requests |
//! | `strided` | PIO-Bench simple strided: 32 KiB at `(i·8 + r)·32 KiB` |
//! | `strided-2d` | PIO-Bench nested strided: a 2×4 process grid, 8 elements of 32 KiB per row every 4th element, rows every 2nd row |
//! | `strided-3d` | the same on a 2×2×2 grid: 4 columns × 4 rows × planes |
//! | `deltas` | repeating delta vector `[r, (3, 4, 7)^n]` in 32 KiB units |
//! | `climate-row` | the thesis's climate micro-benchmark (sec. 2.4.3), row decomposition over 8 processes: time steps 5, 6, 14, 15, 29, … (intervals `{1, 8, 1, 14}`; consecutive steps are adjacent in the file), in each one 32 KiB slice (a process's rows) of each of 16 levels (strided) |
//! | `climate-col` | column decomposition over a 2 × 4 process grid: in each of those time steps, 4 levels × 8 rows of one 32 KiB column slice (2-D strided) |
//! | `pagoda` | Pagoda-like varying strides: variables of 4–20 KiB records, 16–48 records of this rank per variable, N-1 strided over 16 ranks |
//! | `correlation` | 6 groups of 4 scattered records; each step reads a random group's entry then its three successors ("after A come B, C, D") |
//! | `random` | uniform random 32 KiB-aligned reads |
//!
//! Every name also comes with `-noisy` (10 % of the requests are uniformly random,
//! mixed in at random positions) and `-change` (the second half reads with another
//! geometry — stride, shape or record sizes — in a region after the first).

use crate::error::PrefetchError;
use crate::rng::Rng;
use std::io::{self, Write};
use std::path::Path;

/// Request size of most workloads.
pub const SIZE: u64 = 32 << 10;

/// The base workloads, in table order.
pub const BASES: [&str; 10] = [
    "contiguous",
    "strided",
    "strided-2d",
    "strided-3d",
    "deltas",
    "climate-row",
    "climate-col",
    "pagoda",
    "correlation",
    "random",
];

/// Seed of the data sets' fixed layout.
const DATASET_SEED: u64 = 0x6461_7461_7365_7421;

/// A read workload.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    /// `(offset, length)` in request order.
    pub requests: Vec<(u64, u64)>,
    /// Size of the data file; every request lies inside it.
    pub file_size: u64,
}

/// Every workload name: the bases, then each with `-noisy` and `-change`.
pub fn names() -> Vec<String> {
    let mut out: Vec<String> = BASES.iter().map(|b| b.to_string()).collect();
    for suffix in ["-noisy", "-change"] {
        out.extend(BASES.iter().map(|b| format!("{b}{suffix}")));
    }
    out
}

/// The workload `name` with `n` requests for the process picked by `seed`.
pub fn generate(name: &str, n: usize, seed: u64) -> Result<Workload, PrefetchError> {
    let (base, variant) = if let Some(b) = name.strip_suffix("-noisy") {
        (b, "noisy")
    } else if let Some(b) = name.strip_suffix("-change") {
        (b, "change")
    } else {
        (name, "")
    };
    if !BASES.contains(&base) {
        return Err(PrefetchError::Invalid(format!(
            "unknown workload {name:?} (one of {}, each also with -noisy or -change)",
            BASES.join(", ")
        )));
    }
    let n = n.max(2);
    let (requests, end) = match variant {
        "noisy" => {
            let noise = n / 10;
            let (structured, end) = generate_base(base, n - noise, seed, 0, 0);
            (add_noise(structured, noise, end, seed), end)
        }
        "change" => {
            let (mut first, end) = generate_base(base, n / 2, seed, 0, 0);
            let at = end.div_ceil(1 << 20) << 20;
            let (second, end) = generate_base(base, n - n / 2, seed, 1, at);
            first.extend(second);
            (first, end)
        }
        _ => generate_base(base, n, seed, 0, 0),
    };
    let file_size = requests
        .iter()
        .map(|&(o, l)| o + l)
        .max()
        .unwrap_or(0)
        .max(end);
    Ok(Workload {
        name: name.to_string(),
        requests,
        file_size,
    })
}

/// `n` requests of `kind` with geometry `variant` (0 or 1) starting at byte `at`;
/// returns them and the end of the region they belong to.
fn generate_base(
    kind: &str,
    n: usize,
    seed: u64,
    variant: usize,
    at: u64,
) -> (Vec<(u64, u64)>, u64) {
    let mut rng = Rng::new(seed ^ 0x7275_6e5f_7365_6564);
    let s = SIZE;
    let n64 = n as u64;
    let mut out = Vec::with_capacity(n);
    let end = match kind {
        "contiguous" => {
            let p = 4;
            let size = [s, 2 * s][variant];
            let r = seed % p;
            let seg = n64 * size;
            out.extend((0..n64).map(|i| (at + r * seg + i * size, size)));
            at + p * seg
        }
        "strided" => {
            let p = [8, 5][variant];
            let r = seed % p;
            out.extend((0..n64).map(|i| (at + (i * p + r) * s, s)));
            at + n64 * p * s
        }
        "strided-2d" => {
            let (c, px, py) = [(8, 4, 2), (6, 3, 3)][variant];
            let r = seed % (px * py);
            let (rx, ry) = (r % px, r / px);
            let row = c * px * s;
            out.extend(
                (0..n64).map(|i| (at + ((i / c) * py + ry) * row + ((i % c) * px + rx) * s, s)),
            );
            at + n64.div_ceil(c) * py * row
        }
        "strided-3d" => {
            let (c, rows) = [(4, 4), (5, 4)][variant];
            let r = seed % 8;
            let (rx, ry, rz) = (r & 1, (r >> 1) & 1, (r >> 2) & 1);
            let row = c * 2 * s;
            let plane = rows * 2 * row;
            out.extend((0..n64).map(|i| {
                let (k, j, col) = (i / (c * rows), (i / c) % rows, i % c);
                (
                    at + (k * 2 + rz) * plane + (j * 2 + ry) * row + (col * 2 + rx) * s,
                    s,
                )
            }));
            at + n64.div_ceil(c * rows) * 2 * plane
        }
        "deltas" => {
            let (deltas, p): (&[u64], u64) = [(&[3u64, 4, 7][..], 3), (&[2u64, 5][..], 2)][variant];
            let r = seed % p;
            let period: u64 = deltas.iter().sum();
            let k = deltas.len() as u64;
            out.extend((0..n64).map(|i| {
                let within: u64 = deltas[..(i % k) as usize].iter().sum();
                (at + ((i / k) * period + within + r) * s, s)
            }));
            at + (n64 / k + 1) * period * s
        }
        "climate-row" | "climate-col" => {
            // Each time step is `z` levels of `y` rows of `x` slices of 32 KiB; the 8
            // processes form a `py × px` grid over rows and slices. Row decomposition
            // (`py` = 8, `px` = 1): one slice of every level (1-D strided). Column
            // decomposition (`py` = 2, `px` = 4): a block of `y / 2` rows of one slice
            // in every level (2-D strided).
            let (z, y, py, px) = match kind {
                "climate-row" => [(16, 8, 8, 1), (12, 8, 8, 1)][variant],
                _ => [(4, 16, 2, 4), (3, 20, 2, 4)][variant],
            };
            let r = seed % (py * px);
            let (rx, ry) = (r % px, r / px);
            let rows = y / py;
            let row = px * s;
            let plane = y * row;
            let step = z * plane;
            let per_step = z * rows;
            let steps = n64.div_ceil(per_step);
            let times = time_steps(steps as usize);
            out.extend((0..n64).map(|i| {
                let t = times[(i / per_step) as usize];
                let (lz, ly) = ((i % per_step) / rows, i % rows);
                (
                    at + t * step + lz * plane + (ry * rows + ly) * row + rx * s,
                    s,
                )
            }));
            at + (times.last().copied().unwrap_or(0) + 1) * step
        }
        "pagoda" => {
            let p = [16, 12][variant];
            let r = seed % p;
            let mut layout = Rng::new(DATASET_SEED ^ variant as u64);
            let mut base = at;
            let mut var = 0u64;
            while out.len() < n {
                let size = match variant {
                    0 => 4096 * (1 + var % 5),
                    _ => 8192 * (1 + var % 3),
                };
                let records = layout.range(16, 48);
                for j in 0..records {
                    if out.len() < n {
                        out.push((base + (j * p + r) * size, size));
                    }
                }
                base += records * p * size;
                var += 1;
            }
            base
        }
        "correlation" => {
            let (groups, len) = (6, [4, 3][variant]);
            let space = 4096u64;
            let mut layout = Rng::new(DATASET_SEED ^ 0xc0 ^ variant as u64);
            let mut blocks: Vec<u64> = Vec::new();
            while blocks.len() < groups * len {
                let b = layout.below(space);
                if !blocks.contains(&b) {
                    blocks.push(b);
                }
            }
            while out.len() < n {
                let g = rng.below(groups as u64) as usize;
                for &b in &blocks[g * len..(g + 1) * len] {
                    if out.len() < n {
                        out.push((at + b * s, s));
                    }
                }
            }
            at + space * s
        }
        "random" => {
            let size = [s, s / 2][variant];
            let blocks = (4 * n64).max(1024);
            out.extend((0..n64).map(|_| (at + rng.below(blocks) * size, size)));
            at + blocks * size
        }
        other => unreachable!("unknown base workload {other}"),
    };
    (out, end)
}

/// Time steps 5, 6, 14, 15, 29, 30, 38, 39, …: the hours of daily lows and highs,
/// intervals `{1, 8, 1, 14}` (thesis, sec. 2.3.4).
fn time_steps(n: usize) -> Vec<u64> {
    let intervals = [1u64, 8, 1, 14];
    let mut t = 5;
    (0..n)
        .map(|i| {
            let here = t;
            t += intervals[i % 4];
            here
        })
        .collect()
}

/// Mixes `noise` uniformly random requests (32 KiB-aligned in `[0, end)`, each as
/// long as the structured request before it) into `structured` at random positions.
fn add_noise(structured: Vec<(u64, u64)>, noise: usize, end: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut rng = Rng::new(seed ^ 0x6e6f_6973_7921);
    let total = structured.len() + noise;
    // Choose which output positions are noise (partial Fisher-Yates).
    let mut idx: Vec<usize> = (0..total).collect();
    for i in 0..noise {
        let j = i + rng.below((total - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut is_noise = vec![false; total];
    idx[..noise].iter().for_each(|&i| is_noise[i] = true);
    let slots = (end / SIZE).max(1);
    let mut it = structured.into_iter();
    let mut last_len = SIZE;
    let mut out = Vec::with_capacity(total);
    for noisy in is_noise {
        if noisy {
            let len = last_len.min(end);
            let offset = (rng.below(slots) * SIZE).min(end - len);
            out.push((offset, len));
        } else if let Some(r) = it.next() {
            last_len = r.1;
            out.push(r);
        }
    }
    out
}

impl Workload {
    /// Bytes the requests read (with repetitions).
    pub fn read_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.1).sum()
    }

    /// Writes the data file: `file_size` bytes, with deterministic content in every
    /// range a request reads (the rest is left sparse and reads as zeros), synced.
    pub fn write_data(&self, path: &Path) -> io::Result<()> {
        let mut file = std::fs::File::create(path)?;
        file.set_len(self.file_size)?;
        const A: u64 = 4096;
        let mut ranges: Vec<(u64, u64)> = self
            .requests
            .iter()
            .map(|&(o, l)| (o / A * A, ((o + l).div_ceil(A) * A).min(self.file_size)))
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(m) if lo <= m.1 => m.1 = m.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        use std::io::Seek;
        let mut buf = Vec::new();
        for (lo, hi) in merged {
            file.seek(io::SeekFrom::Start(lo))?;
            let mut at = lo;
            while at < hi {
                let chunk = (hi - at).min(1 << 20);
                buf.clear();
                buf.extend((0..chunk).map(|i| content_byte(at + i)));
                file.write_all(&buf)?;
                at += chunk;
            }
        }
        file.sync_all()
    }
}

/// The byte at position `pos` of a workload's data file (inside a read range).
pub fn content_byte(pos: u64) -> u8 {
    let mut r = Rng::new(pos >> 3);
    (r.next_u64() >> (8 * (pos & 7))) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_generates_n_requests_inside_the_file() {
        for name in names() {
            let w = generate(&name, 300, 3).unwrap();
            assert_eq!(w.requests.len(), 300, "{name}");
            assert!(
                w.requests
                    .iter()
                    .all(|&(o, l)| l > 0 && o + l <= w.file_size),
                "{name}"
            );
            // Deterministic.
            assert_eq!(generate(&name, 300, 3).unwrap().requests, w.requests);
        }
        assert!(generate("nope", 10, 0).is_err());
        assert!(generate("strided-x", 10, 0).is_err());
    }

    #[test]
    fn geometry() {
        let w = generate("strided", 4, 3).unwrap();
        assert_eq!(
            w.requests,
            [
                (3 * SIZE, SIZE),
                (11 * SIZE, SIZE),
                (19 * SIZE, SIZE),
                (27 * SIZE, SIZE)
            ]
        );
        let d = generate("deltas", 5, 0).unwrap();
        let units: Vec<u64> = d.requests.iter().map(|r| r.0 / SIZE).collect();
        assert_eq!(units, [0, 3, 7, 14, 17]);
        assert_eq!(time_steps(6), [5, 6, 14, 15, 29, 30]);
        // Climate, column decomposition: per time step 4 levels of 8 rows of one
        // slice (2-D strided), the time steps in the file at 5, 6, 14, 15, ….
        let c = generate("climate-col", 3 * 32, 0).unwrap();
        let at: Vec<u64> = c.requests.iter().map(|r| r.0).collect();
        let (row, plane) = (4 * SIZE, 16 * 4 * SIZE);
        assert!(at[..8].windows(2).all(|w| w[1] - w[0] == row));
        assert_eq!(at[8] - at[0], plane);
        let step = 4 * plane;
        assert_eq!([at[0], at[32], at[64]], [5 * step, 6 * step, 14 * step]);
        let r = generate("climate-row", 17, 0).unwrap();
        assert!(r.requests[..16]
            .windows(2)
            .all(|w| w[1].0 - w[0].0 == 8 * SIZE));
        // The seed picks another process: disjoint offsets.
        let a = generate("strided-2d", 64, 0).unwrap();
        let b = generate("strided-2d", 64, 1).unwrap();
        assert!(a.requests.iter().all(|r| !b.requests.contains(r)));
        // Pagoda: record sizes vary by variable.
        let p = generate("pagoda", 400, 0).unwrap();
        let mut sizes: Vec<u64> = p.requests.iter().map(|r| r.1).collect();
        sizes.dedup();
        assert!(sizes.len() >= 5, "{sizes:?}");
    }

    #[test]
    fn noise_and_change() {
        let clean = generate("strided", 100, 0).unwrap();
        let noisy = generate("strided-noisy", 100, 0).unwrap();
        let structured: Vec<_> = noisy
            .requests
            .iter()
            .filter(|r| clean.requests.contains(r))
            .collect();
        assert!(structured.len() >= 90, "{}", structured.len());
        let change = generate("strided-change", 100, 0).unwrap();
        let first_end = change.requests[..50]
            .iter()
            .map(|r| r.0 + r.1)
            .max()
            .unwrap();
        assert!(change.requests[50..].iter().all(|r| r.0 >= first_end));
        let stride = |r: &[(u64, u64)]| r[1].0 - r[0].0;
        assert_ne!(
            stride(&change.requests[..2]),
            stride(&change.requests[50..52])
        );
    }

    #[test]
    fn data_file_has_content_where_read() {
        let w = generate("random", 20, 1).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        w.write_data(&path).unwrap();
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(file.metadata().unwrap().len(), w.file_size);
        for &(o, l) in &w.requests {
            let mut buf = vec![0u8; l as usize];
            file.read_exact_at(&mut buf, o).unwrap();
            assert!(buf
                .iter()
                .enumerate()
                .all(|(i, &b)| b == content_byte(o + i as u64)));
        }
    }
}
